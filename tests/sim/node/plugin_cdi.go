package main

// The device plugin's CDI spec, shaped as the one NVIDIA's plugin writes for its CDI strategies (read in
// NVIDIA/k8s-device-plugin v0.20.0 internal/cdi/cdi.go CreateSpecFile, and the toolkit's pkg/nvcdi it calls):
// kind k8s.device-plugin.nvidia.com/gpu, in /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json (the CDI
// library's GenerateNameForSpec: vendor-class), one device per GPU named by the device ID strategy (its UUID or
// its index), each injecting the GPU's /dev/nvidiaN, and common edits with the driver's control device and
// NVIDIA_VISIBLE_DEVICES=void (pkg/nvcdi/wrapper.go GetCommonEdits). The driver's libraries and hooks are left
// out: nothing here reads them. The device nodes carry their type and numbers, since this machine has no
// /dev/nvidiaN for the CDI library to stat (the CDI spec allows fully specified nodes).

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// The NVIDIA driver's character-device major and nvidiactl's minor.
const (
	nvidiaMajor     = 195
	nvidiactlMinor  = 255
	cdiSpecVersion  = "0.5.0"
	cdiSpecFileName = cdiVendor + "-" + cdiClass + ".json"
)

func (p *devicePlugin) cdiSpec() *cdispec.Spec {
	spec := &cdispec.Spec{Version: cdiSpecVersion, Kind: cdiVendor + "/" + cdiClass,
		ContainerEdits: cdispec.ContainerEdits{
			Env: []string{visibleDevicesEnv + "=void"},
			DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidiactl", HostPath: "/dev/nvidiactl", Type: "c",
				Major: nvidiaMajor, Minor: nvidiactlMinor}},
		}}
	seen := map[string]bool{}
	for _, device := range p.config.Devices {
		name := p.deviceName(device)
		if seen[name] { // replicas of one card: one CDI device
			continue
		}
		seen[name] = true
		node := fmt.Sprintf("/dev/nvidia%d", device.Minor)
		spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: []*cdispec.DeviceNode{{Path: node, HostPath: node, Type: "c", Major: nvidiaMajor,
				Minor: int64(device.Minor)}}}})
	}
	return spec
}

// writeCDISpec writes the spec into dir (atomically: the runtime may read the folder at any moment).
func (p *devicePlugin) writeCDISpec(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("the CDI strategies need --cdi-spec-dir")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	raw, err := json.MarshalIndent(p.cdiSpec(), "", " ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, cdiSpecFileName)
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(path+".tmp", path)
}

// newResponseID: a random (version 4) UUID, as NVIDIA's plugin makes one per Allocate response for the key of
// its CDI annotation.
func newResponseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
