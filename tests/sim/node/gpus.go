package main

// Real GPUs (a GPU machine): each container sees only the GPUs it was given, as with the NVIDIA container
// toolkit. The runtime starts the container through `gpuops-simnode container-init` in a new mount and PID
// namespace; container-init gives it a private /dev holding the ordinary character devices, the driver's
// control devices and only its own /dev/nvidiaN, hides the other GPUs' /proc/driver/nvidia/gpus entries, and
// execs the container's command, which stays PID 1.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// realGPU is one line of the machine's GPU table (tests/sim/nvml_gpus.py writes it from NVML).
type realGPU struct {
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
	Minor int    `json:"minor"`
	BusID string `json:"bus_id"` // as /proc/driver/nvidia/gpus names it, e.g. 0000:18:00.0
}

func loadGPUTable(path string) ([]realGPU, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var table []realGPU
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return table, nil
}

// deviceListAsVolumeMountsRoot: where the device plugin's volume-mounts answer puts one /dev/null mount per device
// and where NVIDIA_VISIBLE_DEVICES then points; the toolkit (accept-nvidia-visible-devices-as-volume-mounts) takes
// the device names from those mounts' container paths.
const deviceListAsVolumeMountsRoot = "/var/run/nvidia-container-devices"

// volumeMountDevices: the device names the toolkit reads from a container's mounts: each mount of /dev/null whose
// container path lies below the root, named by the rest of the path (the toolkit's requestsFromMounts).
func volumeMountDevices(mounts []*runtimeapi.Mount) []string {
	seen := map[string]bool{}
	var names []string
	for _, mount := range mounts {
		if filepath.Clean(mount.GetHostPath()) != "/dev/null" {
			continue
		}
		target := filepath.Clean(mount.GetContainerPath())
		name := strings.Trim(strings.TrimPrefix(target, deviceListAsVolumeMountsRoot), "/")
		if !strings.HasPrefix(target, deviceListAsVolumeMountsRoot) || name == "" || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	return names
}

// toolkitDeviceNames: the devices the toolkit's hook picks for a container: the volume-mount devices when there
// are any, else NVIDIA_VISIBLE_DEVICES (UUIDs, indexes or all; unset, empty, void and none name none).
func toolkitDeviceNames(env []string, mounts []*runtimeapi.Mount) []string {
	if names := volumeMountDevices(mounts); len(names) > 0 {
		return names
	}
	value := ""
	for _, entry := range env {
		if v, ok := strings.CutPrefix(entry, "NVIDIA_VISIBLE_DEVICES="); ok {
			value = v
		}
	}
	var names []string
	for _, name := range strings.Split(value, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	if contains(names, "void") || contains(names, "none") {
		return nil
	}
	return names
}

// containerGPUs decides which of the machine's GPUs a container gets: the GPU device nodes its CDI devices
// injected, and those the toolkit picks from its environment and mounts (after the CDI edits: NVIDIA's specs set
// NVIDIA_VISIBLE_DEVICES=void, so an image's "all" does not add every GPU).
func containerGPUs(table []realGPU, env []string, deviceNodes []string, mounts []*runtimeapi.Mount) []realGPU {
	picked := map[int]bool{}
	for _, minor := range gpuMinors(deviceNodes) {
		for _, gpu := range table {
			if gpu.Minor == minor {
				picked[gpu.Index] = true
			}
		}
	}
	for _, name := range toolkitDeviceNames(env, mounts) {
		for _, gpu := range table {
			if name == "all" || name == gpu.UUID || name == strconv.Itoa(gpu.Index) {
				picked[gpu.Index] = true
			}
		}
	}
	var gpus []realGPU
	for _, gpu := range table {
		if picked[gpu.Index] {
			gpus = append(gpus, gpu)
		}
	}
	return gpus
}

// containerInitArgv wraps a container's command in container-init: on a GPU machine (privateDev) a /dev with only
// the given GPUs; and the device plugin's /dev/null mounts below /var/run/nvidia-container-devices, where the
// container can list them.
func containerInitArgv(self string, privateDev bool, gpus []realGPU, mounts []*runtimeapi.Mount, path string, argv []string) []string {
	wrapped := []string{self, "container-init"}
	if privateDev {
		var minors, buses []string
		for _, gpu := range gpus {
			minors = append(minors, strconv.Itoa(gpu.Minor))
			buses = append(buses, gpu.BusID)
		}
		wrapped = append(wrapped, "--private-dev", "--minors", strings.Join(minors, ","), "--bus-ids", strings.Join(buses, ","))
	}
	for _, mount := range deviceListMounts(mounts) {
		wrapped = append(wrapped, "--device-mount", mount.GetHostPath()+":"+filepath.Clean(mount.GetContainerPath()))
	}
	wrapped = append(wrapped, "--", path)
	return append(wrapped, argv[1:]...)
}

// deviceListMounts: a container's mounts below /var/run/nvidia-container-devices (the only CRI mounts this
// runtime makes: the others, service-account tokens and /etc/hosts, are files the process reads where they are).
func deviceListMounts(mounts []*runtimeapi.Mount) []*runtimeapi.Mount {
	var picked []*runtimeapi.Mount
	for _, mount := range mounts {
		if strings.HasPrefix(filepath.Clean(mount.GetContainerPath()), deviceListAsVolumeMountsRoot+"/") {
			picked = append(picked, mount)
		}
	}
	return picked
}

// prctl(PR_CAPBSET_DROP, CAP_MKNOD): linux/prctl.h and linux/capability.h.
const (
	prCapbsetDrop = 24
	capMknod      = 27
)

var baseDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}
var driverDevices = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}

func runContainerInit(args []string) error {
	flags := flag.NewFlagSet("container-init", flag.ContinueOnError)
	privateDev := flags.Bool("private-dev", false, "a private /dev with only the container's GPUs (a GPU machine)")
	minorList := flags.String("minors", "", "minor numbers of the container's /dev/nvidiaN")
	busList := flags.String("bus-ids", "", "PCI bus IDs of the container's GPUs (/proc/driver/nvidia/gpus)")
	var deviceMounts listFlag
	flags.Var(&deviceMounts, "device-mount", "HOSTPATH:CONTAINERPATH below /var/run/nvidia-container-devices (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	command := flags.Args()
	if len(command) == 0 {
		return fmt.Errorf("container-init: no command")
	}
	// Our mounts stay in this namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("container-init: make / private: %w", err)
	}
	if *privateDev {
		if err := privateDevWithGPUs(*minorList, *busList); err != nil {
			return err
		}
	}
	if err := mountDeviceList(deviceMounts); err != nil {
		return err
	}
	return syscall.Exec(command[0], command, os.Environ())
}

// mountDeviceList makes /var/run/nvidia-container-devices in this mount namespace a folder of its own holding
// the given mounts (one /dev/null per device, as containerd mounts the device plugin's answer).
func mountDeviceList(mounts []string) error {
	if len(mounts) == 0 {
		return nil
	}
	// The sim makes the mount point when it starts (and removes it when it stops); made here if missing.
	if err := os.MkdirAll(deviceListAsVolumeMountsRoot, 0o755); err != nil {
		return fmt.Errorf("container-init: %w", err)
	}
	if err := syscall.Mount("tmpfs", deviceListAsVolumeMountsRoot, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=755"); err != nil {
		return fmt.Errorf("container-init: %s: %w", deviceListAsVolumeMountsRoot, err)
	}
	for _, mount := range mounts {
		host, target, ok := strings.Cut(mount, ":")
		if !ok || !strings.HasPrefix(target, deviceListAsVolumeMountsRoot+"/") {
			return fmt.Errorf("container-init: --device-mount %q: want HOSTPATH:%s/NAME", mount, deviceListAsVolumeMountsRoot)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("container-init: %w", err)
		}
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return fmt.Errorf("container-init: %w", err)
		}
		if err := syscall.Mount(host, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("container-init: bind %s on %s: %w", host, target, err)
		}
	}
	return nil
}

// privateDevWithGPUs gives this mount namespace a /dev with the ordinary devices, the driver's control devices
// and only the given /dev/nvidiaN, and hides the other GPUs from /proc/driver/nvidia/gpus.
func privateDevWithGPUs(minorList, busList string) error {
	devices := append([]string{}, baseDevices...)
	if minorList != "" {
		devices = append(devices, driverDevices...)
		for _, minor := range strings.Split(minorList, ",") {
			devices = append(devices, "nvidia"+minor)
		}
	}
	type node struct {
		name string
		mode uint32
		rdev uint64
	}
	var nodes []node
	for _, name := range devices {
		var stat syscall.Stat_t
		if err := syscall.Stat("/dev/"+name, &stat); err == nil && stat.Mode&syscall.S_IFMT == syscall.S_IFCHR {
			nodes = append(nodes, node{name, stat.Mode, stat.Rdev})
		}
	}
	if err := syscall.Mount("tmpfs", "/dev", "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=755"); err != nil {
		return fmt.Errorf("container-init: private /dev: %w", err)
	}
	if err := hideOtherGPUs(strings.Split(busList, ",")); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := syscall.Mknod("/dev/"+n.name, n.mode, int(n.rdev)); err != nil {
			return fmt.Errorf("container-init: mknod /dev/%s: %w", n.name, err)
		}
		_ = os.Chmod("/dev/"+n.name, os.FileMode(n.mode&0o777))
	}
	for link, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		_ = os.Symlink(target, "/dev/"+link)
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err == nil {
		_ = syscall.Mount("shm", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777")
	}
	// NVML run as root creates the device files it misses (directly, or through the setuid nvidia-modprobe), and
	// would find every GPU again. In a real container the devices cgroup refuses to open them; here the container
	// loses CAP_MKNOD (dropped from the bounding set, so no exec, setuid or not, gets it back).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, capMknod, 0); errno != 0 {
		return fmt.Errorf("container-init: drop CAP_MKNOD: %w", errno)
	}
	return nil
}

// hideOtherGPUs leaves only the given GPUs in /proc/driver/nvidia/gpus, where NVML enumerates the cards.
func hideOtherGPUs(keep []string) error {
	const gpus = "/proc/driver/nvidia/gpus"
	entries, err := os.ReadDir(gpus)
	if err != nil {
		return nil // no NVIDIA driver: nothing to hide
	}
	// The kept entries are bound from a second view of the original folder (in the container's own /dev, so
	// nothing is left on the host), since the tmpfs will cover it.
	const saved = "/dev/.gpus-original"
	if err := os.Mkdir(saved, 0o700); err != nil {
		return err
	}
	if err := syscall.Mount(gpus, saved, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("container-init: bind %s: %w", gpus, err)
	}
	if err := syscall.Mount("tmpfs", gpus, "tmpfs", 0, "mode=555"); err != nil {
		return fmt.Errorf("container-init: cover %s: %w", gpus, err)
	}
	wanted := map[string]bool{}
	for _, bus := range keep {
		wanted[strings.ToLower(bus)] = true
	}
	for _, entry := range entries {
		if !wanted[strings.ToLower(entry.Name())] {
			continue
		}
		target := filepath.Join(gpus, entry.Name())
		if err := os.Mkdir(target, 0o555); err != nil {
			return err
		}
		if err := syscall.Mount(filepath.Join(saved, entry.Name()), target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("container-init: bind %s: %w", target, err)
		}
	}
	if err := syscall.Unmount(saved, syscall.MNT_DETACH); err != nil {
		return err
	}
	return os.Remove(saved)
}
