package main

import (
	"context"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func testPlugin(mode string, replicated bool) *devicePlugin {
	p := &devicePlugin{byID: map[string]pluginDevice{}, config: pluginConfig{Resource: "nvidia.com/gpu", VisibleDevices: mode,
		Replicated: replicated, FailRequestsGreaterThanOne: replicated}}
	for _, d := range []pluginDevice{{ID: "GPU-a", UUID: "GPU-a", Index: "0"}, {ID: "GPU-b", UUID: "GPU-b", Index: "1"}} {
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

func TestAllocateNamesTheAllocatedDevicesAsNvidiasPluginDoes(t *testing.T) {
	if got := allocate(t, testPlugin("uuid", false), "GPU-b", "GPU-a").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "GPU-b,GPU-a" {
		t.Errorf("uuid mode: %q", got)
	}
	if got := allocate(t, testPlugin("index", false), "GPU-b").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "1" {
		t.Errorf("index mode: %q", got)
	}
	cdi := allocate(t, testPlugin("unset", false), "GPU-a")
	if _, set := cdi.Envs["NVIDIA_VISIBLE_DEVICES"]; set || len(cdi.CdiDevices) != 1 || !strings.HasSuffix(cdi.CdiDevices[0].Name, "=GPU-a") {
		t.Errorf("CDI mode: env %v, CDI %v", cdi.Envs, cdi.CdiDevices)
	}
	if got := allocate(t, testPlugin("void", false), "GPU-a").Envs["NVIDIA_VISIBLE_DEVICES"]; got != "void" {
		t.Errorf("void mode: %q", got)
	}
}

func TestReplicasOfOneCardNameItOnceAndRequestsAboveOneFail(t *testing.T) {
	p := testPlugin("uuid", true)
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
	_, err := testPlugin("uuid", false).Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-z"}}}})
	if err == nil || !strings.Contains(err.Error(), "unknown device: GPU-z") {
		t.Errorf("unknown device: %v", err)
	}
}

func TestPreferredAllocationSpreadsReplicasOverCards(t *testing.T) {
	p := testPlugin("uuid", true)
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
