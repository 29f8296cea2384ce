package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCDINamesComeFromTheRequestThenTheAnnotationsEachOnce(t *testing.T) {
	config := &runtimeapi.ContainerConfig{
		CDIDevices: []*runtimeapi.CDIDevice{{Name: "k8s.device-plugin.nvidia.com/gpu=GPU-b"}},
		Annotations: map[string]string{
			"cdi.k8s.io/nvidia-device-plugin_6f1c": "k8s.device-plugin.nvidia.com/gpu=GPU-a,k8s.device-plugin.nvidia.com/gpu=GPU-b",
			"io.kubernetes.container.hash":         "1234"}}
	names, err := cdiDeviceNames(config)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k8s.device-plugin.nvidia.com/gpu=GPU-b", "k8s.device-plugin.nvidia.com/gpu=GPU-a"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("got %v", names)
	}
	config.Annotations["cdi.k8s.io/bad"] = "not-a-cdi-name"
	if _, err := cdiDeviceNames(config); err == nil || !strings.Contains(err.Error(), "not-a-cdi-name") {
		t.Errorf("a malformed annotation: %v", err)
	}
}

// specDirs: the node's /etc/cdi and /var/run/cdi equivalents, with the plugin's spec (uuid names) in the second.
func specDirs(t *testing.T, idStrategy string) []string {
	t.Helper()
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "etc", "cdi"), filepath.Join(root, "var", "run", "cdi")}
	p := testPlugin("cdi-cri", false)
	p.config.DeviceIDStrategy = idStrategy
	if _, err := p.writeCDISpec(dirs[1]); err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestThePluginsSpecInjectsTheGPUsDeviceNodeAndVoidsTheVariable(t *testing.T) {
	dirs := specDirs(t, "uuid")
	if _, err := os.Stat(filepath.Join(dirs[1], "k8s.device-plugin.nvidia.com-gpu.json")); err != nil {
		t.Fatalf("NVIDIA's spec file name: %v", err)
	}
	injection, err := injectCDIDevices(dirs, []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"},
		[]string{"k8s.device-plugin.nvidia.com/gpu=GPU-b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/dev/nvidiactl", "/dev/nvidia3"}; !reflect.DeepEqual(injection.DeviceNodes, want) {
		t.Errorf("device nodes %v, want %v", injection.DeviceNodes, want)
	}
	// The library appends the spec's variable after the image's (runtime-tools keys its cache by the whole entry):
	// the last one is what the toolkit reads and what the process gets.
	if last := injection.Env[len(injection.Env)-1]; last != "NVIDIA_VISIBLE_DEVICES=void" {
		t.Errorf("env %v: the spec's void should come last", injection.Env)
	}
	if got := uuids(containerGPUs(table, injection.Env, injection.DeviceNodes, nil)); !reflect.DeepEqual(got, []string{"GPU-b"}) {
		t.Errorf("the container's GPUs: %v", got)
	}
}

func TestIndexNamedSpecsResolveIndexNames(t *testing.T) {
	injection, err := injectCDIDevices(specDirs(t, "index"), nil, []string{"k8s.device-plugin.nvidia.com/gpu=0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuMinors(injection.DeviceNodes); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("minors %v", got)
	}
}

func TestANameNoSpecHoldsFailsNamingIt(t *testing.T) {
	_, err := injectCDIDevices(specDirs(t, "uuid"), nil, []string{"k8s.device-plugin.nvidia.com/gpu=GPU-zzz"})
	if err == nil || !strings.Contains(err.Error(), "unresolvable CDI devices k8s.device-plugin.nvidia.com/gpu=GPU-zzz") {
		t.Errorf("got %v", err)
	}
}

func TestNoNamesChangesNothing(t *testing.T) {
	injection, err := injectCDIDevices(nil, []string{"NVIDIA_VISIBLE_DEVICES=GPU-a"}, nil)
	if err != nil || len(injection.DeviceNodes) != 0 || !reflect.DeepEqual(injection.Env, []string{"NVIDIA_VISIBLE_DEVICES=GPU-a"}) {
		t.Errorf("got %+v, %v", injection, err)
	}
}

// A DRA driver writes a spec per claim into a folder the runtime also reads: every listed folder is searched.
func TestSpecsInAnyListedFolderResolve(t *testing.T) {
	dirs := specDirs(t, "uuid")
	claim := `{"cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim",
	  "devices": [{"name": "8b2c-gpu-1", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia3", "type": "c", "major": 195, "minor": 3}]}}]}`
	if err := os.MkdirAll(dirs[0], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirs[0], "k8s.gpu.nvidia.com-claim_8b2c.json"), []byte(claim), 0o644); err != nil {
		t.Fatal(err)
	}
	injection, err := injectCDIDevices(dirs, nil, []string{"k8s.gpu.nvidia.com/claim=8b2c-gpu-1", "k8s.device-plugin.nvidia.com/gpu=GPU-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := uuids(containerGPUs(table, injection.Env, injection.DeviceNodes, nil)); !reflect.DeepEqual(got, []string{"GPU-a", "GPU-b"}) {
		t.Errorf("the container's GPUs: %v (nodes %v)", got, injection.DeviceNodes)
	}
}

func TestOnlyGPUDeviceNodesAreGPUs(t *testing.T) {
	got := gpuMinors([]string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia12", "/dev/nvidia-caps/nvidia-cap21", "/dev/dri/card1"})
	if !reflect.DeepEqual(got, []int{12}) {
		t.Errorf("got %v", got)
	}
}
