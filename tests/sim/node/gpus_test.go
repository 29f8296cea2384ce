package main

import (
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var table = []realGPU{{UUID: "GPU-a", Index: 0, Minor: 0, BusID: "0000:18:00.0"}, {UUID: "GPU-b", Index: 1, Minor: 3, BusID: "0000:2a:00.0"}}

func uuids(gpus []realGPU) []string {
	var names []string
	for _, gpu := range gpus {
		names = append(names, gpu.UUID)
	}
	return names
}

// As the toolkit's hook picks devices (NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go
// VisibleDevices, requestsFromMounts, devicesFromEnvvars).
func TestAContainerGetsTheGPUsItsEnvironmentOrMountsName(t *testing.T) {
	devices := []*runtimeapi.Mount{{HostPath: "/dev/null", ContainerPath: "/var/run/nvidia-container-devices/GPU-b"}}
	for _, c := range []struct {
		env    []string
		mounts []*runtimeapi.Mount
		nodes  []string
		want   []string
	}{
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-b"}, nil, nil, []string{"GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=1,0"}, nil, nil, []string{"GPU-a", "GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=all"}, nil, nil, []string{"GPU-a", "GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=void"}, nil, nil, nil},
		{[]string{"NVIDIA_VISIBLE_DEVICES="}, nil, nil, nil},
		{[]string{"PATH=/bin"}, nil, nil, nil},
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-unknown"}, nil, nil, nil},
		// volume-mounts: the mounts name the devices, the variable only points at the folder.
		{[]string{"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"}, devices, nil, []string{"GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"},
			[]*runtimeapi.Mount{{HostPath: "/dev/null", ContainerPath: "/var/run/nvidia-container-devices/0"}}, nil, []string{"GPU-a"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"}, nil, nil, nil},
		// only /dev/null mounts count
		{nil, []*runtimeapi.Mount{{HostPath: "/tmp/x", ContainerPath: "/var/run/nvidia-container-devices/GPU-a"}}, nil, nil},
		// CDI: the injected device node (minor 3 is GPU-b), and the spec's void over the image's all.
		{[]string{"NVIDIA_VISIBLE_DEVICES=void"}, nil, []string{"/dev/nvidiactl", "/dev/nvidia3"}, []string{"GPU-b"}},
	} {
		if got := uuids(containerGPUs(table, c.env, c.nodes, c.mounts)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v %v %v: got %v, want %v", c.env, c.mounts, c.nodes, got, c.want)
		}
	}
}

func TestContainerInitIsToldTheMinorsBusIDsAndDeviceMounts(t *testing.T) {
	mounts := []*runtimeapi.Mount{{HostPath: "/dev/null", ContainerPath: "/var/run/nvidia-container-devices/GPU-b"},
		{HostPath: "/var/lib/kubelet/pods/x/etc-hosts", ContainerPath: "/etc/hosts"}}
	got := containerInitArgv("/bin/simnode", true, table[1:], mounts, "/usr/bin/bash", []string{"bash", "-c", "nvidia-smi -L"})
	want := []string{"/bin/simnode", "container-init", "--private-dev", "--minors", "3", "--bus-ids", "0000:2a:00.0",
		"--device-mount", "/dev/null:/var/run/nvidia-container-devices/GPU-b", "--", "/usr/bin/bash", "-c", "nvidia-smi -L"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	got = containerInitArgv("/bin/simnode", false, nil, mounts[:1], "/bin/sh", []string{"sh"})
	want = []string{"/bin/simnode", "container-init", "--device-mount", "/dev/null:/var/run/nvidia-container-devices/GPU-b", "--", "/bin/sh"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("without GPUs: got %v", got)
	}
}
