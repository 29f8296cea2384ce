package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"sigs.k8s.io/yaml"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

func testGPUs() []draGPU {
	gpu := func(minor int, uuid string) draGPU {
		return draGPU{Minor: minor, UUID: uuid, ProductName: "NVIDIA H20", Brand: "Nvidia", Architecture: "Hopper",
			CudaComputeCapability: "9.0", DriverVersion: "570.124.06", CudaDriverVersion: "12.8",
			PCIBusID: "0000:18:00.0", MemoryBytes: 97871 << 20}
	}
	return []draGPU{gpu(0, "GPU-a"), gpu(2, "GPU-b")}
}

func testDriver(t *testing.T, gpus []draGPU) *draDriver {
	t.Helper()
	dir := t.TempDir()
	d, err := newDRADriver(draConfig{Node: "prod102", GPUs: gpus}, dir, filepath.Join(dir, "checkpoint.json"), filepath.Join(dir, "faults.json"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func allocatedClaim(uid, name string, devices ...string) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, device := range devices {
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: draDriverName, Pool: "prod102", Device: device})
	}
	return claim
}

func readSpec(t *testing.T, d *draDriver, uid string) cdispec.Spec {
	t.Helper()
	raw, err := os.ReadFile(cdiSpecPath(d.cdiRoot, uid))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestDevicesAreNamedAndDescribedAsNvidiasDriverPublishesThem(t *testing.T) {
	devices := draDevices(testGPUs())
	if len(devices) != 2 || devices[0].name != "gpu-0" || devices[1].name != "gpu-2" {
		t.Fatalf("names: %+v", devices)
	}
	attrs := devices[1].api.Attributes
	if *attrs["type"].StringValue != "gpu" || *attrs["uuid"].StringValue != "GPU-b" || *attrs["productName"].StringValue != "NVIDIA H20" {
		t.Errorf("attributes: %+v", attrs)
	}
	if *attrs["driverVersion"].VersionValue != "570.124.6" || *attrs["cudaComputeCapability"].VersionValue != "9.0.0" {
		t.Errorf("versions must be semantic versions: %v %v", *attrs["driverVersion"].VersionValue, *attrs["cudaComputeCapability"].VersionValue)
	}
	if _, ok := attrs["resource.kubernetes.io/pciBusID"]; !ok {
		t.Error("no standard pciBusID attribute")
	}
	if _, gone := attrs["index"]; gone {
		t.Error("index is no longer published")
	}
	if memory := devices[0].api.Capacity["memory"].Value; memory.Value() != 97871<<20 {
		t.Errorf("memory capacity: %v", memory.String())
	}
}

func TestAGPUInMIGModePublishesItsMIGDevicesInstead(t *testing.T) {
	gpus := testGPUs()[:1]
	gpus[0].MIG = []draMIG{{UUID: "MIG-x", Profile: "1g.10gb", GIProfileID: 19, PlacementStart: 3, PlacementSize: 1, MemoryBytes: 9856 << 20, Multiprocessors: 16}}
	devices := draDevices(gpus)
	if len(devices) != 1 || devices[0].name != "gpu-0-mig-1g10gb-19-3" {
		t.Fatalf("MIG devices: %+v", devices)
	}
	attrs := devices[0].api.Attributes
	if *attrs["type"].StringValue != "mig" || *attrs["parentUUID"].StringValue != "GPU-a" || *attrs["profile"].StringValue != "1g.10gb" {
		t.Errorf("MIG attributes: %+v", attrs)
	}
	if _, ok := devices[0].api.Capacity["memorySlice3"]; !ok {
		t.Errorf("MIG capacity: %+v", devices[0].api.Capacity)
	}
}

func TestPrepareWritesTheClaimsCDISpecAndAnswersItsDeviceIDs(t *testing.T) {
	d := testDriver(t, testGPUs())
	results, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-1", "hold-0-gpu-abcde", "gpu-2")})
	if err != nil || results["uid-1"].Err != nil {
		t.Fatalf("prepare: %v %v", err, results["uid-1"].Err)
	}
	devices := results["uid-1"].Devices
	if len(devices) != 1 || devices[0].DeviceName != "gpu-2" || devices[0].PoolName != "prod102" ||
		devices[0].CDIDeviceIDs[0] != "k8s.gpu.nvidia.com/claim=uid-1-gpu-2" {
		t.Fatalf("answer: %+v", devices)
	}
	if !strings.HasSuffix(cdiSpecPath(d.cdiRoot, "uid-1"), "/k8s.gpu.nvidia.com-claim_uid-1.yaml") {
		t.Errorf("spec file name: %s", cdiSpecPath(d.cdiRoot, "uid-1"))
	}
	spec := readSpec(t, d, "uid-1")
	if spec.Kind != "k8s.gpu.nvidia.com/claim" || len(spec.ContainerEdits.Env) != 1 || spec.ContainerEdits.Env[0] != "NVIDIA_VISIBLE_DEVICES=void" {
		t.Errorf("spec-wide edits: %+v", spec)
	}
	if len(spec.Devices) != 1 || spec.Devices[0].Name != "uid-1-gpu-2" || spec.Devices[0].ContainerEdits.DeviceNodes[0].Path != "/dev/nvidia2" {
		t.Errorf("spec devices: %+v", spec.Devices)
	}
	for _, edit := range spec.Devices[0].ContainerEdits.Env {
		if strings.Contains(edit, "GPU-") {
			t.Errorf("the real driver writes no UUID variable: %s", edit)
		}
	}
	// Repeated prepare (kubelet restart): the same answer, from the checkpoint of a new process too.
	again, _ := testDriverFrom(t, d).PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-1", "hold-0-gpu-abcde", "gpu-2")})
	if again["uid-1"].Err != nil || again["uid-1"].Devices[0].DeviceName != "gpu-2" {
		t.Errorf("repeat: %+v", again["uid-1"])
	}
}

func testDriverFrom(t *testing.T, d *draDriver) *draDriver {
	t.Helper()
	next, err := newDRADriver(draConfig{Node: d.node, GPUs: testGPUs()}, d.cdiRoot, d.checkpoint, d.faultsFile)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func TestPrepareRefusesWhatIsNotTheNodesOrIsAlreadyPrepared(t *testing.T) {
	d := testDriver(t, testGPUs())
	results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{
		allocatedClaim("uid-1", "a", "gpu-0"), allocatedClaim("uid-2", "b", "gpu-0"), allocatedClaim("uid-3", "c", "gpu-7"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "d", UID: "uid-4"}}})
	if results["uid-1"].Err != nil {
		t.Fatal(results["uid-1"].Err)
	}
	if err := results["uid-2"].Err; err == nil || !strings.Contains(err.Error(), "already prepared for claim demo/a") {
		t.Errorf("overlap: %v", err)
	}
	if err := results["uid-3"].Err; err == nil || !strings.Contains(err.Error(), "gpu-7") {
		t.Errorf("unknown device: %v", err)
	}
	if err := results["uid-4"].Err; err == nil || !strings.Contains(err.Error(), "not yet allocated") {
		t.Errorf("unallocated: %v", err)
	}
}

func TestUnprepareRemovesTheSpecAndFreesTheDevice(t *testing.T) {
	d := testDriver(t, testGPUs())
	_, _ = d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-1", "a", "gpu-0")})
	results, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{
		{UID: "uid-1"}, {UID: "never-prepared"}})
	if err != nil || results["uid-1"] != nil || results["never-prepared"] != nil {
		t.Fatalf("unprepare: %v %v", err, results)
	}
	if _, err := os.Stat(cdiSpecPath(d.cdiRoot, "uid-1")); !os.IsNotExist(err) {
		t.Errorf("spec left: %v", err)
	}
	again, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-2", "b", "gpu-0")})
	if again["uid-2"].Err != nil {
		t.Errorf("device not freed: %v", again["uid-2"].Err)
	}
}

func TestTheWrongDeviceFaultHandsOutTheFirstGPUsNode(t *testing.T) {
	d := testDriver(t, testGPUs())
	if err := os.WriteFile(d.faultsFile, []byte(`{"dra_wrong_device": "first"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-1", "a", "gpu-2")})
	if results["uid-1"].Devices[0].DeviceName != "gpu-2" {
		t.Errorf("the answer still names the allocated device: %+v", results["uid-1"].Devices)
	}
	if node := readSpec(t, d, "uid-1").Devices[0].ContainerEdits.DeviceNodes[0].Path; node != "/dev/nvidia0" {
		t.Errorf("wrong-device fault: %s", node)
	}
}

func TestAMIGDeviceIsPreparedWithItsParentAndItsCapabilityNodes(t *testing.T) {
	gpus := testGPUs()[:1]
	gpus[0].MIG = []draMIG{
		{UUID: "MIG-x", Profile: "1g.10gb", GIProfileID: 19, PlacementStart: 0, PlacementSize: 1, GICapMinor: 66, CICapMinor: 67},
		{UUID: "MIG-y", Profile: "1g.10gb", GIProfileID: 19, PlacementStart: 1, PlacementSize: 1, GICapMinor: 75, CICapMinor: 76}}
	d := testDriver(t, gpus)
	results, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-1", "a", "gpu-0-mig-1g10gb-19-1")})
	if err := results["uid-1"].Err; err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, node := range readSpec(t, d, "uid-1").Devices[0].ContainerEdits.DeviceNodes {
		paths = append(paths, node.Path)
		if strings.HasPrefix(node.Path, "/dev/nvidia-caps/") && (node.Type != "c" || node.Major != nvidiaCapsMajor) {
			t.Errorf("capability node: %+v", node)
		}
	}
	if strings.Join(paths, " ") != "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap75 /dev/nvidia-caps/nvidia-cap76" {
		t.Errorf("MIG device nodes: %v", paths)
	}
	// The wrong-device fault hands out the first MIG device's instances instead.
	if err := os.WriteFile(d.faultsFile, []byte(`{"dra_wrong_device": "first"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-2", "b", "gpu-0-mig-1g10gb-19-0")})
	_, _ = d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-1"}})
	results, _ = d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{allocatedClaim("uid-3", "c", "gpu-0-mig-1g10gb-19-1")})
	if err := results["uid-3"].Err; err != nil {
		t.Fatal(err)
	}
	if nodes := readSpec(t, d, "uid-3").Devices[0].ContainerEdits.DeviceNodes; nodes[1].Path != "/dev/nvidia-caps/nvidia-cap66" {
		t.Errorf("wrong-device fault on MIG: %+v", nodes)
	}
}

func TestADeviceTaintFaultIsPublishedOnThatDevice(t *testing.T) {
	d := testDriver(t, testGPUs())
	if err := os.WriteFile(d.faultsFile, []byte(`{"dra_taints": {"gpu-2": {"key": "gpu.nvidia.com/xid", "value": "79"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	slice := d.slice(d.faults().Taints)
	if len(slice.Devices) != 2 || len(slice.Devices[0].Taints) != 0 {
		t.Fatalf("devices: %+v", slice.Devices)
	}
	taints := slice.Devices[1].Taints
	if len(taints) != 1 || taints[0].Key != "gpu.nvidia.com/xid" || taints[0].Value != "79" || taints[0].Effect != resourceapi.DeviceTaintEffectNoSchedule {
		t.Errorf("taint of gpu-2: %+v", taints)
	}
	if len(d.ordered[1].api.Taints) != 0 {
		t.Error("the published copy, not the device, carries the taint")
	}
}
