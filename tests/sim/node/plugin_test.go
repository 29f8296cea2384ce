package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// testPlugin: "strategy" or "strategy/index" (the device ID strategy).
func testPlugin(strategy string, replicated bool) *devicePlugin {
	list, id, _ := strings.Cut(strategy, "/")
	p := &devicePlugin{byID: map[string]pluginDevice{}, config: pluginConfig{Resource: "nvidia.com/gpu",
		DeviceListStrategy: strings.Split(list, ","), DeviceIDStrategy: id, Replicated: replicated, FailRequestsGreaterThanOne: replicated}}
	if err := p.validateStrategies(); err != nil {
		panic(err)
	}
	for _, d := range []pluginDevice{{ID: "GPU-a", UUID: "GPU-a", Index: "0", Minor: 0}, {ID: "GPU-b", UUID: "GPU-b", Index: "1", Minor: 3}} {
		if replicated {
			d.ID += "::0"
		}
		p.config.Devices = append(p.config.Devices, d)
		p.byID[d.ID] = d
	}
	return p
}

func allocate(t *testing.T, p *devicePlugin, ids ...string) *pluginapi.ContainerAllocateResponse {
	t.Helper()
	answer, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		t.Fatalf("Allocate(%v): %v", ids, err)
	}
	return answer.ContainerResponses[0]
}

// The answer's shapes, as NVIDIA/k8s-device-plugin v0.20.0 internal/plugin/server.go builds them:
// getAllocateResponse, updateResponseForDeviceListEnvVar, updateResponseForDeviceMounts, updateResponseForCDI and
// getCDIDeviceAnnotations (the CDI library's UpdateAnnotations key: cdi.k8s.io/nvidia-device-plugin_<uuid>).
func TestAllocateAnswersInEachStrategyAsNvidiasPluginDoes(t *testing.T) {
	if got := allocate(t, testPlugin("envvar", false), "GPU-b", "GPU-a").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "GPU-b,GPU-a" {
		t.Errorf("envvar/uuid: %q", got)
	}
	if got := allocate(t, testPlugin("envvar/index", false), "GPU-b").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "1" {
		t.Errorf("envvar/index: %q", got)
	}
	mounts := allocate(t, testPlugin("volume-mounts", false), "GPU-b", "GPU-a")
	if got := mounts.Envs["NVIDIA_VISIBLE_DEVICES"]; got != "/var/run/nvidia-container-devices" {
		t.Errorf("volume-mounts env: %q", got)
	}
	if len(mounts.Mounts) != 2 || mounts.Mounts[0].HostPath != "/dev/null" ||
		mounts.Mounts[0].ContainerPath != "/var/run/nvidia-container-devices/GPU-b" ||
		mounts.Mounts[1].ContainerPath != "/var/run/nvidia-container-devices/GPU-a" || mounts.Mounts[0].ReadOnly {
		t.Errorf("volume-mounts mounts: %v", mounts.Mounts)
	}
	if got := allocate(t, testPlugin("volume-mounts/index", false), "GPU-b").Mounts[0].ContainerPath; got != "/var/run/nvidia-container-devices/1" {
		t.Errorf("volume-mounts/index: %q", got)
	}
	cri := allocate(t, testPlugin("cdi-cri", false), "GPU-a")
	if _, set := cri.Envs["NVIDIA_VISIBLE_DEVICES"]; set || len(cri.CdiDevices) != 1 ||
		cri.CdiDevices[0].Name != "k8s.device-plugin.nvidia.com/gpu=GPU-a" || len(cri.Annotations) != 0 {
		t.Errorf("cdi-cri: env %v, CDI %v, annotations %v", cri.Envs, cri.CdiDevices, cri.Annotations)
	}
	if got := allocate(t, testPlugin("cdi-cri/index", false), "GPU-b").CdiDevices[0].Name; got != "k8s.device-plugin.nvidia.com/gpu=1" {
		t.Errorf("cdi-cri/index: %q", got)
	}
	annotated := allocate(t, testPlugin("cdi-annotations", false), "GPU-a", "GPU-b")
	if len(annotated.Annotations) != 1 || len(annotated.CdiDevices) != 0 || len(annotated.Envs) != 0 {
		t.Fatalf("cdi-annotations: %+v", annotated)
	}
	for key, value := range annotated.Annotations {
		id, found := strings.CutPrefix(key, "cdi.k8s.io/nvidia-device-plugin_")
		if !found || len(id) != 36 || len(key) > len("cdi.k8s.io/")+63 {
			t.Errorf("annotation key %q", key)
		}
		if value != "k8s.device-plugin.nvidia.com/gpu=GPU-a,k8s.device-plugin.nvidia.com/gpu=GPU-b" {
			t.Errorf("annotation value %q", value)
		}
	}
	for _, value := range allocate(t, testPlugin("cdi-annotations/index", false), "GPU-b").Annotations {
		if value != "k8s.device-plugin.nvidia.com/gpu=1" {
			t.Errorf("cdi-annotations/index: %q", value)
		}
	}
	// Two strategies, one of them not CDI: both answers.
	both := allocate(t, testPlugin("envvar,cdi-cri", false), "GPU-a")
	if both.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a" || len(both.CdiDevices) != 1 {
		t.Errorf("envvar,cdi-cri: %+v", both)
	}
}

func TestAWrongStrategyIsRefusedNamingIt(t *testing.T) {
	p := &devicePlugin{config: pluginConfig{DeviceListStrategy: []string{"cdi"}}}
	if err := p.validateStrategies(); err == nil || !strings.Contains(err.Error(), `"cdi"`) {
		t.Errorf("got %v", err)
	}
	p = &devicePlugin{config: pluginConfig{DeviceIDStrategy: "minor"}}
	if err := p.validateStrategies(); err == nil || !strings.Contains(err.Error(), `"minor"`) {
		t.Errorf("got %v", err)
	}
}

func TestTheWrongIDFaultNamesTheFirstDeviceInEveryStrategy(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(faults, []byte(`{"wrong_id": "first"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []string{"envvar", "volume-mounts", "cdi-cri"} {
		p := testPlugin(strategy, false)
		p.faultsFile = faults
		answer := allocate(t, p, "GPU-b")
		if !strings.Contains(fmt.Sprint(answer.Envs, answer.Mounts, answer.CdiDevices), "GPU-a") {
			t.Errorf("%s: %+v", strategy, answer)
		}
	}
}

func TestReplicasOfOneCardNameItOnceAndRequestsAboveOneFail(t *testing.T) {
	p := testPlugin("envvar", true)
	if got := allocate(t, p, "GPU-a::0").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "GPU-a" {
		t.Errorf("a replica names its card: %q", got)
	}
	_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a::0", "GPU-b::0"}}}})
	if err == nil || !strings.Contains(err.Error(), "maximum request size for shared resources is 1") {
		t.Errorf("two shared units: %v", err)
	}
}

func TestAnUnknownDeviceIsRefused(t *testing.T) {
	_, err := testPlugin("envvar", false).Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-z"}}}})
	if err == nil || !strings.Contains(err.Error(), "unknown device: GPU-z") {
		t.Errorf("unknown device: %v", err)
	}
}

func TestPreferredAllocationSpreadsReplicasOverCards(t *testing.T) {
	p := testPlugin("envvar", true)
	for _, extra := range []pluginDevice{{ID: "GPU-a::1", UUID: "GPU-a"}, {ID: "GPU-b::1", UUID: "GPU-b"}} {
		p.byID[extra.ID] = extra
	}
	answer, err := p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: []string{"GPU-a::0", "GPU-a::1", "GPU-b::0", "GPU-b::1"}, AllocationSize: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	picked := answer.ContainerResponses[0].DeviceIDs
	if len(picked) != 2 || p.byID[picked[0]].UUID == p.byID[picked[1]].UUID {
		t.Errorf("two units should land on two cards: %v", picked)
	}
}
