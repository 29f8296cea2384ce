package main

// What the DRA GPU driver publishes and what it prepares, as NVIDIA's DRA driver (gpu.nvidia.com) does: one
// device per GPU named gpu-<minor> (or, for a GPU in MIG mode, one per MIG device named
// gpu-<parentMinor>-mig-<profile>-<giProfileID>-<placementStart>), with NVIDIA's attribute and capacity names, and
// for each prepared claim one CDI spec of kind k8s.gpu.nvidia.com/claim whose devices are the GPUs' device nodes
// and whose common edits set NVIDIA_VISIBLE_DEVICES=void. Written from the API and NVIDIA's documented output,
// not from NVIDIA's code.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const (
	draDriverName = "gpu.nvidia.com"
	draCDIVendor  = "k8s." + draDriverName
	draCDIClass   = "claim"
)

// draGPU is one GPU of the node, as the sim writes it (tests/sim/nodes.py, dra-driver.json).
type draGPU struct {
	Minor                 int      `json:"minor"`
	UUID                  string   `json:"uuid"`
	ProductName           string   `json:"productName"`
	Brand                 string   `json:"brand"`
	Architecture          string   `json:"architecture"`
	CudaComputeCapability string   `json:"cudaComputeCapability"` // "9.0"
	DriverVersion         string   `json:"driverVersion"`         // "570.124.06", as nvidia-smi prints it
	CudaDriverVersion     string   `json:"cudaDriverVersion"`     // "12.8"
	PCIBusID              string   `json:"pciBusID"`              // "0000:18:00.0"
	MemoryBytes           int64    `json:"memoryBytes"`
	MIG                   []draMIG `json:"mig"` // a GPU in MIG mode publishes these instead of itself
}

// draMIG is one pre-created MIG device.
type draMIG struct {
	UUID            string `json:"uuid"`
	Profile         string `json:"profile"` // "1g.10gb"
	GIProfileID     int    `json:"giProfileID"`
	PlacementStart  int    `json:"placementStart"`
	PlacementSize   int    `json:"placementSize"`
	MemoryBytes     int64  `json:"memoryBytes"`
	Multiprocessors int64  `json:"multiprocessors"`
	// The minors of its GPU instance's and compute instance's capability devices, /dev/nvidia-caps/nvidia-cap<N>: the
	// DeviceFileMinor of /proc/driver/nvidia/capabilities/gpu<m>/mig/gi<g>/access and .../ci<c>/access, which
	// NVIDIA's driver reads (the sim computes them as the kernel driver numbers them, tests/sim/topology.py).
	GICapMinor int `json:"giCapMinor"`
	CICapMinor int `json:"ciCapMinor"`
}

// draDevice is a published device and what preparing it takes.
type draDevice struct {
	name      string
	api       resourceapi.Device
	minor     int    // the GPU's /dev/nvidia<minor> (the parent's, for a MIG device)
	uuid      string // the GPU's or MIG device's UUID
	isMIG     bool
	capMinors []int // a MIG device's GI and CI capability devices, /dev/nvidia-caps/nvidia-cap<N>
}

// migCanonicalName: gpu-<parentMinor>-mig-<profile without dots, lower case>-<giProfileID>-<placementStart>.
func migCanonicalName(parentMinor int, mig draMIG) string {
	profile := strings.ToLower(strings.ReplaceAll(mig.Profile, ".", ""))
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", parentMinor, profile, mig.GIProfileID, mig.PlacementStart)
}

// semverOf turns "570.124.06" / "9.0" / "12.8" into a semantic version ("570.124.6", "9.0.0", "12.8.0"),
// as the API's version attributes require.
func semverOf(text string) string {
	parts := strings.Split(strings.TrimSpace(text), ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, part := range parts[:3] {
		if n, err := strconv.Atoi(part); err == nil {
			parts[i] = strconv.Itoa(n)
		}
	}
	return strings.Join(parts[:3], ".")
}

func stringAttr(value string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: ptr.To(value)}
}

func versionAttr(value string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: ptr.To(semverOf(value))}
}

func commonAttributes(gpu draGPU) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attributes := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"productName":                     stringAttr(gpu.ProductName),
		"brand":                           stringAttr(gpu.Brand),
		"architecture":                    stringAttr(gpu.Architecture),
		"cudaComputeCapability":           versionAttr(gpu.CudaComputeCapability),
		"driverVersion":                   versionAttr(gpu.DriverVersion),
		"cudaDriverVersion":               versionAttr(gpu.CudaDriverVersion),
		"resource.kubernetes.io/pciBusID": stringAttr(gpu.PCIBusID),
	}
	return attributes
}

// draDevices is the node's pool: full GPUs, and the MIG devices of GPUs in MIG mode (which do not publish themselves).
func draDevices(gpus []draGPU) []draDevice {
	var devices []draDevice
	for _, gpu := range gpus {
		if len(gpu.MIG) == 0 {
			attributes := commonAttributes(gpu)
			attributes["type"] = stringAttr("gpu")
			attributes["uuid"] = stringAttr(gpu.UUID)
			device := resourceapi.Device{Name: fmt.Sprintf("gpu-%d", gpu.Minor), Attributes: attributes}
			if gpu.MemoryBytes > 0 {
				device.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": {Value: *resource.NewQuantity(gpu.MemoryBytes, resource.BinarySI)}}
			}
			devices = append(devices, draDevice{name: device.Name, api: device, minor: gpu.Minor, uuid: gpu.UUID})
			continue
		}
		for _, mig := range gpu.MIG {
			attributes := commonAttributes(gpu)
			attributes["type"] = stringAttr("mig")
			attributes["uuid"] = stringAttr(mig.UUID)
			attributes["parentUUID"] = stringAttr(gpu.UUID)
			attributes["profile"] = stringAttr(mig.Profile)
			capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory":          {Value: *resource.NewQuantity(mig.MemoryBytes, resource.BinarySI)},
				"multiprocessors": {Value: *resource.NewQuantity(mig.Multiprocessors, resource.DecimalSI)},
			}
			for slice := mig.PlacementStart; slice < mig.PlacementStart+max(mig.PlacementSize, 1); slice++ {
				capacity[resourceapi.QualifiedName(fmt.Sprintf("memorySlice%d", slice))] = resourceapi.DeviceCapacity{
					Value: *resource.NewQuantity(1, resource.DecimalSI)}
			}
			name := migCanonicalName(gpu.Minor, mig)
			devices = append(devices, draDevice{name: name, minor: gpu.Minor, uuid: mig.UUID, isMIG: true,
				capMinors: []int{mig.GICapMinor, mig.CICapMinor},
				api:       resourceapi.Device{Name: name, Attributes: attributes, Capacity: capacity}})
		}
	}
	return devices
}

// cdiDeviceID is the CDI device a prepared device is handed to the runtime as:
// k8s.gpu.nvidia.com/claim=<claimUID>-<deviceName>.
func cdiDeviceID(claimUID, deviceName string) string {
	return fmt.Sprintf("%s/%s=%s-%s", draCDIVendor, draCDIClass, claimUID, deviceName)
}

// cdiSpecPath: <cdiRoot>/k8s.gpu.nvidia.com-claim_<claimUID>.yaml (the CDI library's transient spec name).
func cdiSpecPath(cdiRoot, claimUID string) string {
	return filepath.Join(cdiRoot, fmt.Sprintf("%s-%s_%s.yaml", draCDIVendor, draCDIClass, claimUID))
}

// controlDevices: the driver's control devices that exist on this machine (none in the simulated cluster).
var controlDevices = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

func existingDeviceNode(path string) *cdispec.DeviceNode {
	var stat syscall.Stat_t
	if err := syscall.Stat(path, &stat); err != nil || stat.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		return nil
	}
	return &cdispec.DeviceNode{Path: path, Type: "c", Major: int64(unixMajor(stat.Rdev)), Minor: int64(unixMinor(stat.Rdev))}
}

func unixMajor(dev uint64) uint64 { return (dev >> 8) & 0xfff }
func unixMinor(dev uint64) uint64 { return (dev & 0xff) | ((dev >> 12) & 0xfff00) }

// nvidiaCapsMajor: the character major of /dev/nvidia-caps/* where the machine has none (NVIDIA's driver reads it
// from /proc/devices, "nvidia-caps"; its mock-NVML CI setup uses this number).
const nvidiaCapsMajor = 236

// charDevice is the device node at path, the machine's own when it has one, else one with the given numbers.
func charDevice(path string, major, minor int64) *cdispec.DeviceNode {
	if node := existingDeviceNode(path); node != nil {
		return node
	}
	return &cdispec.DeviceNode{Path: path, Type: "c", Major: major, Minor: minor}
}

// claimSpec is the CDI spec for one claim's prepared devices. `nodesOf` picks the device whose nodes are handed out
// for each device: the device itself, except when a fault makes the driver prepare the wrong one.
func claimSpec(claimUID string, devices []draDevice, nodesOf func(draDevice) draDevice) *cdispec.Spec {
	spec := &cdispec.Spec{Version: "0.6.0", Kind: draCDIVendor + "/" + draCDIClass,
		ContainerEdits: cdispec.ContainerEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=void"}}}
	for _, path := range controlDevices {
		if node := existingDeviceNode(path); node != nil {
			spec.ContainerEdits.DeviceNodes = append(spec.ContainerEdits.DeviceNodes, node)
		}
	}
	for _, device := range devices {
		handed := nodesOf(device)
		// The simulated cluster has no /dev/nvidiaN: the spec then names the device numbers itself.
		nodes := []*cdispec.DeviceNode{charDevice(fmt.Sprintf("/dev/nvidia%d", handed.minor), nvidiaMajor, int64(handed.minor))}
		// A MIG device: its parent's node, and its GPU and compute instances' capability nodes, which the container
		// needs to open the MIG device (NVIDIA's GetDevNodesForMigDevice).
		for _, minor := range handed.capMinors {
			nodes = append(nodes, charDevice(fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minor), nvidiaCapsMajor, int64(minor)))
		}
		edits := cdispec.ContainerEdits{DeviceNodes: nodes}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: claimUID + "-" + device.name, ContainerEdits: edits})
	}
	return spec
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
