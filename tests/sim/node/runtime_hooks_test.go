package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A CDI spec's hooks run in runc when the container starts (containerd 2.4 + runc 1.5 on the H200, 2026-12-04:
// docs/evidence/h200-real-runtime.md): a hook whose program is missing fails StartContainer, and the container is left
// exited with 128, reason StartError, and the whole error as its message.
func hookedSpec(t *testing.T, hookPath string) string {
	t.Helper()
	dir := t.TempDir()
	spec := `{"cdiVersion": "0.5.0", "kind": "gpuops.example/gpu", "devices": [{"name": "hooked", "containerEdits": {
	  "env": ["GPUOPS_PROBE=1"], "hooks": [{"hookName": "createContainer", "path": "` + hookPath + `",
	  "args": ["nvidia-cdi-hook", "create-symlinks"]}]}}]}`
	if err := os.WriteFile(filepath.Join(dir, "gpuops-probe.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startHooked(t *testing.T, hookPath string) (*processRuntime, string, error) {
	t.Helper()
	state := t.TempDir()
	r := &processRuntime{sandboxes: map[string]*sandbox{}, containers: map[string]*container{},
		images: map[string]*runtimeapi.Image{}, stateDir: state, unpullable: map[string]bool{},
		cdiDirs: []string{hookedSpec(t, hookPath)}}
	ctx := context.Background()
	pod := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u"}}
	sandbox, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	config := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "hook"},
		Image: &runtimeapi.ImageSpec{Image: "demo"}, Command: []string{"true"},
		Annotations: map[string]string{"cdi.k8s.io/gpuops-probe": "gpuops.example/gpu=hooked"}}
	created, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandbox.PodSandboxId, Config: config, SandboxConfig: pod})
	if err != nil {
		t.Fatalf("a spec with hooks is resolved when the container is created: %v", err)
	}
	_, err = r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId})
	return r, created.ContainerId, err
}

func TestAMissingHookFailsTheStartAsRuncDoes(t *testing.T) {
	r, id, err := startHooked(t, "/nonexistent/nvidia-cdi-hook")
	want := "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: " +
		"unable to start container process: error during container init: error running createContainer hook #0: " +
		"fork/exec /nonexistent/nvidia-cdi-hook: no such file or directory: unknown"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("StartContainer: %v\nwant %s", err, want)
	}
	got, _ := r.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	status := got.GetStatus()
	if status.State != runtimeapi.ContainerState_CONTAINER_EXITED || status.ExitCode != 128 || status.Reason != "StartError" ||
		status.Message != want {
		t.Errorf("status %v exit %d reason %q message %q", status.State, status.ExitCode, status.Reason, status.Message)
	}
}

func TestAHookThatIsThereLetsTheContainerStart(t *testing.T) {
	hook := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, id, err := startHooked(t, hook)
	if err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	c := r.containers[id]
	<-c.exited
	if c.exitCode != 0 {
		t.Errorf("exit %d, %s", c.exitCode, c.message)
	}
}

func TestHooksAreListedInRuncsOrderAndCountedPerKind(t *testing.T) {
	injection, err := injectCDIDevices([]string{hookedSpec(t, "/x/hook")}, nil, []string{"gpuops.example/gpu=hooked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(injection.Hooks) != 1 || injection.Hooks[0] != (cdiHook{Kind: "createContainer", Index: 0, Path: "/x/hook"}) {
		t.Errorf("hooks %+v", injection.Hooks)
	}
}
