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
)

// realGPU is one line of the machine's GPU table (tests/device/nvml_gpus.py writes it from NVML).
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

// visibleGPUs decides, as the toolkit does, which GPUs a container gets: the CDI devices the kubelet passed,
// else those NVIDIA_VISIBLE_DEVICES names (UUIDs or indexes, or all); none for unset, empty, void or none.
func visibleGPUs(table []realGPU, env []string) []realGPU {
	names := ""
	for _, entry := range env {
		if value, ok := strings.CutPrefix(entry, "GPUOPS_SIM_CDI_DEVICES="); ok && value != "" {
			names = value
			break
		}
		if value, ok := strings.CutPrefix(entry, "NVIDIA_VISIBLE_DEVICES="); ok {
			names = value
		}
	}
	names = strings.TrimSpace(names)
	if names == "" || names == "void" || names == "none" {
		return nil
	}
	if names == "all" {
		return table
	}
	var picked []realGPU
	for _, name := range strings.Split(names, ",") {
		name = strings.TrimSpace(name)
		for _, gpu := range table {
			if name == gpu.UUID || name == strconv.Itoa(gpu.Index) {
				picked = append(picked, gpu)
			}
		}
	}
	return picked
}

// containerInitArgv wraps a container's command in container-init for the GPUs it gets.
func containerInitArgv(self string, gpus []realGPU, path string, argv []string) []string {
	var minors, buses []string
	for _, gpu := range gpus {
		minors = append(minors, strconv.Itoa(gpu.Minor))
		buses = append(buses, gpu.BusID)
	}
	wrapped := []string{self, "container-init", "--minors", strings.Join(minors, ","), "--bus-ids", strings.Join(buses, ","), "--", path}
	return append(wrapped, argv[1:]...)
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
	minorList := flags.String("minors", "", "minor numbers of the container's /dev/nvidiaN")
	busList := flags.String("bus-ids", "", "PCI bus IDs of the container's GPUs (/proc/driver/nvidia/gpus)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	command := flags.Args()
	if len(command) == 0 {
		return fmt.Errorf("container-init: no command")
	}
	devices := append([]string{}, baseDevices...)
	if *minorList != "" {
		devices = append(devices, driverDevices...)
		for _, minor := range strings.Split(*minorList, ",") {
			devices = append(devices, "nvidia"+minor)
		}
	}
	// Our mounts stay in this namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("container-init: make / private: %w", err)
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
	if err := hideOtherGPUs(strings.Split(*busList, ",")); err != nil {
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
	return syscall.Exec(command[0], command, os.Environ())
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
