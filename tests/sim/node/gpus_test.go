package main

import (
	"reflect"
	"testing"
)

var table = []realGPU{{UUID: "GPU-a", Index: 0, Minor: 0, BusID: "0000:18:00.0"}, {UUID: "GPU-b", Index: 1, Minor: 3, BusID: "0000:2a:00.0"}}

func uuids(gpus []realGPU) []string {
	var names []string
	for _, gpu := range gpus {
		names = append(names, gpu.UUID)
	}
	return names
}

func TestAContainerGetsTheGPUsItsEnvironmentNames(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-b"}, []string{"GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=1,0"}, []string{"GPU-b", "GPU-a"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=all"}, []string{"GPU-a", "GPU-b"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=void"}, nil},
		{[]string{"NVIDIA_VISIBLE_DEVICES="}, nil},
		{[]string{"PATH=/bin"}, nil},
		// CDI devices win over the variable (the image's NVIDIA_VISIBLE_DEVICES=all, say).
		{[]string{"NVIDIA_VISIBLE_DEVICES=all", "GPUOPS_SIM_CDI_DEVICES=GPU-a"}, []string{"GPU-a"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-unknown"}, nil},
	} {
		if got := uuids(visibleGPUs(table, c.env)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.env, got, c.want)
		}
	}
}

func TestContainerInitIsToldTheMinorsAndBusIDs(t *testing.T) {
	got := containerInitArgv("/bin/simnode", table[1:], "/usr/bin/bash", []string{"bash", "-c", "nvidia-smi -L"})
	want := []string{"/bin/simnode", "container-init", "--minors", "3", "--bus-ids", "0000:2a:00.0", "--", "/usr/bin/bash", "-c", "nvidia-smi -L"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
}
