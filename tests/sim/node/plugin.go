package main

// The device plugin: advertises one node's simulated GPUs to the real kubelet over the device plugin API
// (v1beta1) and answers Allocate the way NVIDIA's k8s-device-plugin does in each of its DEVICE_LIST_STRATEGY
// values (envvar, volume-mounts, cdi-annotations, cdi-cri) and DEVICE_ID_STRATEGY values (uuid, index); for the
// CDI strategies it writes the CDI spec the runtime resolves the names against (plugin_cdi.go). Written from the
// API and from reading NVIDIA's internal/plugin/server.go (getAllocateResponse), not from NVIDIA's code.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// pluginConfig is written by the sim (tests/sim/nodes.py) from a topology node.
type pluginConfig struct {
	Resource string         `json:"resource"`
	Devices  []pluginDevice `json:"devices"`
	// DEVICE_LIST_STRATEGY: one or more of envvar, volume-mounts, cdi-annotations, cdi-cri.
	DeviceListStrategy []string `json:"device_list_strategy"`
	// DEVICE_ID_STRATEGY: uuid | index, how the answer names a device.
	DeviceIDStrategy           string `json:"device_id_strategy"`
	FailRequestsGreaterThanOne bool   `json:"fail_requests_greater_than_one"`
	Replicated                 bool   `json:"replicated"`
}

type pluginDevice struct {
	ID    string `json:"id"`    // the ID registered with the kubelet (GPU-uuid, MIG-uuid, GPU-uuid::N)
	UUID  string `json:"uuid"`  // what NVIDIA_VISIBLE_DEVICES says in uuid mode
	Index string `json:"index"` // what it says in index mode ("0", or "0:3" for a MIG device)
	Minor int    `json:"minor"` // the GPU's /dev/nvidiaN (the CDI spec's device node)
}

// pluginFaults is a file tests write to make the plugin misbehave; read on every call and watched.
type pluginFaults struct {
	Unhealthy []string `json:"unhealthy"` // device IDs reported Unhealthy in ListAndWatch
	// Device IDs that turn Unhealthy once the kubelet has allocated them to a container, as a GPU hit by an XID while
	// its pod runs: reported in ListAndWatch at once, while the pod holds the device.
	UnhealthyOnceAllocated []string `json:"unhealthy_once_allocated"`
	// "first": every allocation's answer names the node's first device, whatever the kubelet allocated
	// (a plugin bug: two pods told to use one GPU).
	WrongID string `json:"wrong_id"`
}

type devicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	config     pluginConfig
	faultsFile string
	byID       map[string]pluginDevice
	mu         sync.Mutex
	changed    chan struct{}
	allocated  map[string]bool // device IDs the kubelet has allocated since the plugin started
}

func runPlugin(args []string) error {
	flags := flag.NewFlagSet("plugin", flag.ContinueOnError)
	dir := flags.String("plugin-dir", "", "the node's device-plugins folder (holds the kubelet's kubelet.sock)")
	configFile := flags.String("config", "", "JSON plugin configuration")
	cdiDir := flags.String("cdi-spec-dir", "", "where the CDI spec goes for the CDI strategies (NVIDIA's plugin: /var/run/cdi)")
	faultsFile := flags.String("faults", "", "JSON faults file (optional; may appear later)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*configFile)
	if err != nil {
		return err
	}
	plugin := &devicePlugin{faultsFile: *faultsFile, byID: map[string]pluginDevice{}, changed: make(chan struct{}, 1)}
	if err := json.Unmarshal(raw, &plugin.config); err != nil {
		return fmt.Errorf("%s: %w", *configFile, err)
	}
	for _, device := range plugin.config.Devices {
		plugin.byID[device.ID] = device
	}
	if err := plugin.validateStrategies(); err != nil {
		return fmt.Errorf("%s: %w", *configFile, err)
	}
	if plugin.anyCDI() && len(plugin.config.Devices) > 0 {
		// As NVIDIA's plugin: the spec is written when the plugin starts, before it registers.
		path, err := plugin.writeCDISpec(*cdiDir)
		if err != nil {
			return err
		}
		log.Printf("plugin: wrote the CDI spec %s", path)
	}
	socketName := "gpuops-" + strings.NewReplacer("/", "-", ".", "-").Replace(plugin.config.Resource) + ".sock"
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go plugin.watchFaults()
	for {
		served, err := plugin.serveOnce(*dir, socketName, stop)
		if err != nil {
			log.Printf("plugin: %v (retrying)", err)
		}
		if !served {
			return nil // stopped by a signal
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serveOnce serves until the kubelet restarts (its socket is recreated, which also wipes ours) or a signal
// comes; returns false on a signal.
func (p *devicePlugin) serveOnce(dir, socketName string, stop chan os.Signal) (bool, error) {
	kubeletSocket := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	for !exists(kubeletSocket) {
		select {
		case <-stop:
			return false, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	kubeletInode := inode(kubeletSocket)
	path := filepath.Join(dir, socketName)
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		return true, err
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	go func() { _ = server.Serve(listener) }()
	defer server.Stop()
	if err := p.register(kubeletSocket, socketName); err != nil {
		return true, err
	}
	log.Printf("plugin: registered %s (%d devices) with the kubelet as %s", p.config.Resource, len(p.config.Devices), socketName)
	for {
		select {
		case <-stop:
			_ = os.Remove(path)
			return false, nil
		case <-time.After(200 * time.Millisecond):
		}
		// The kubelet wipes the folder when it starts: a new kubelet.sock (or our socket gone) means register anew.
		if inode(kubeletSocket) != kubeletInode || !exists(path) {
			log.Printf("plugin: the kubelet restarted; registering again")
			return true, nil
		}
	}
}

func (p *devicePlugin) register(kubeletSocket, socketName string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: socketName, ResourceName: p.config.Resource,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	return err
}

func (p *devicePlugin) faults() pluginFaults {
	var faults pluginFaults
	if p.faultsFile == "" {
		return faults
	}
	if raw, err := os.ReadFile(p.faultsFile); err == nil {
		_ = json.Unmarshal(raw, &faults)
	}
	return faults
}

// watchFaults wakes ListAndWatch streams when the faults file changes (health updates).
func (p *devicePlugin) watchFaults() {
	last := p.faults()
	for range time.Tick(200 * time.Millisecond) {
		now := p.faults()
		if !reflect.DeepEqual(now, last) {
			last = now
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}
}

func (p *devicePlugin) devices() []*pluginapi.Device {
	faults := p.faults()
	unhealthy := map[string]bool{}
	for _, id := range faults.Unhealthy {
		unhealthy[id] = true
	}
	p.mu.Lock()
	for _, id := range faults.UnhealthyOnceAllocated {
		unhealthy[id] = unhealthy[id] || p.allocated[id]
	}
	p.mu.Unlock()
	devices := make([]*pluginapi.Device, 0, len(p.config.Devices))
	for _, device := range p.config.Devices {
		health := pluginapi.Healthy
		if unhealthy[device.ID] {
			health = pluginapi.Unhealthy
		}
		devices = append(devices, &pluginapi.Device{ID: device.ID, Health: health})
	}
	return devices
}

func (p *devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (p *devicePlugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-p.changed:
			log.Printf("plugin: device health changed; sending the list again")
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
				return err
			}
		}
	}
}

// GetPreferredAllocation spreads replicated (time-sliced) units over distinct cards first, as NVIDIA's plugin does.
func (p *devicePlugin) GetPreferredAllocation(_ context.Context, request *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	response := &pluginapi.PreferredAllocationResponse{}
	for _, container := range request.ContainerRequests {
		picked := append([]string{}, container.MustIncludeDeviceIDs...)
		used := map[string]bool{}
		for _, id := range picked {
			used[p.byID[id].UUID] = true
		}
		available := append([]string{}, container.AvailableDeviceIDs...)
		sort.Strings(available)
		for pass := 0; pass < 2 && len(picked) < int(container.AllocationSize); pass++ {
			for _, id := range available {
				if len(picked) >= int(container.AllocationSize) || contains(picked, id) {
					continue
				}
				if pass == 0 && used[p.byID[id].UUID] {
					continue
				}
				picked = append(picked, id)
				used[p.byID[id].UUID] = true
			}
		}
		response.ContainerResponses = append(response.ContainerResponses,
			&pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: picked})
	}
	return response, nil
}

const (
	visibleDevicesEnv      = "NVIDIA_VISIBLE_DEVICES"
	volumeMountsHostPath   = "/dev/null"
	volumeMountsRoot       = "/var/run/nvidia-container-devices"
	cdiVendor              = "k8s.device-plugin.nvidia.com"
	cdiClass               = "gpu"
	cdiAnnotationPrefix    = "cdi.k8s.io/"
	cdiAnnotationPluginKey = "nvidia-device-plugin"
)

var deviceListStrategies = []string{"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"}

func (p *devicePlugin) validateStrategies() error {
	if len(p.config.DeviceListStrategy) == 0 {
		p.config.DeviceListStrategy = []string{"envvar"}
	}
	for _, strategy := range p.config.DeviceListStrategy {
		if !contains(deviceListStrategies, strategy) {
			return fmt.Errorf("invalid device list strategy %q: want one of %v", strategy, deviceListStrategies)
		}
	}
	switch p.config.DeviceIDStrategy {
	case "":
		p.config.DeviceIDStrategy = "uuid"
	case "uuid", "index":
	default:
		return fmt.Errorf("invalid device ID strategy %q: want uuid or index", p.config.DeviceIDStrategy)
	}
	return nil
}

func (p *devicePlugin) includes(strategy string) bool {
	return contains(p.config.DeviceListStrategy, strategy)
}

func (p *devicePlugin) anyCDI() bool { return p.includes("cdi-annotations") || p.includes("cdi-cri") }

func (p *devicePlugin) allCDI() bool {
	for _, strategy := range p.config.DeviceListStrategy {
		if !strings.HasPrefix(strategy, "cdi-") {
			return false
		}
	}
	return true
}

// deviceName: how the answer names a device, by the device ID strategy (the UUID, or the index "0" / "0:3").
func (p *devicePlugin) deviceName(device pluginDevice) string {
	if p.config.DeviceIDStrategy == "index" {
		return device.Index
	}
	return device.UUID
}

func (p *devicePlugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	faults := p.faults()
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		if p.config.Replicated && p.config.FailRequestsGreaterThanOne && len(container.DevicesIds) > 1 {
			// NVIDIA's wording; the kubelet turns it into UnexpectedAdmissionError.
			return nil, fmt.Errorf("request for '%s: %d' too large: maximum request size for shared resources is 1",
				p.config.Resource, len(container.DevicesIds))
		}
		var names []string
		for _, id := range container.DevicesIds {
			device, known := p.byID[id]
			if !known {
				return nil, fmt.Errorf("invalid allocation request for '%s': unknown device: %s", p.config.Resource, id)
			}
			if faults.WrongID == "first" {
				device = p.config.Devices[0]
			}
			if name := p.deviceName(device); !contains(names, name) { // replicas of one card name it once
				names = append(names, name)
			}
		}
		p.noteAllocated(container.DevicesIds, faults.UnhealthyOnceAllocated)
		answer := p.answer(names)
		log.Printf("plugin: Allocate %v -> env %v mounts %d annotations %v cdi %d", container.DevicesIds, answer.Envs,
			len(answer.Mounts), answer.Annotations, len(answer.CdiDevices))
		response.ContainerResponses = append(response.ContainerResponses, answer)
	}
	return response, nil
}

// noteAllocated records the allocated devices; one the faults turn Unhealthy once allocated wakes ListAndWatch.
func (p *devicePlugin) noteAllocated(ids, unhealthyOnceAllocated []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allocated == nil {
		p.allocated = map[string]bool{}
	}
	for _, id := range ids {
		p.allocated[id] = true
		if contains(unhealthyOnceAllocated, id) {
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}
}

// answer: the container's part of the Allocate response for the named devices, in each configured strategy.
func (p *devicePlugin) answer(names []string) *pluginapi.ContainerAllocateResponse {
	answer := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
	if p.anyCDI() {
		var qualified []string
		for _, name := range names {
			qualified = append(qualified, cdiVendor+"/"+cdiClass+"="+name)
		}
		if p.includes("cdi-annotations") {
			// The CDI library's annotation key: the prefix, the plugin's name, "_" and a fresh ID per response.
			answer.Annotations = map[string]string{
				cdiAnnotationPrefix + cdiAnnotationPluginKey + "_" + newResponseID(): strings.Join(qualified, ",")}
		}
		if p.includes("cdi-cri") {
			for _, name := range qualified {
				answer.CdiDevices = append(answer.CdiDevices, &pluginapi.CDIDevice{Name: name})
			}
		}
	}
	if p.allCDI() {
		return answer
	}
	if p.includes("envvar") {
		answer.Envs[visibleDevicesEnv] = strings.Join(names, ",")
	}
	if p.includes("volume-mounts") {
		answer.Envs[visibleDevicesEnv] = volumeMountsRoot
		for _, name := range names {
			answer.Mounts = append(answer.Mounts, &pluginapi.Mount{HostPath: volumeMountsHostPath,
				ContainerPath: filepath.Join(volumeMountsRoot, name)})
		}
	}
	return answer
}

func (p *devicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func contains(list []string, item string) bool {
	for _, entry := range list {
		if entry == item {
			return true
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func inode(path string) uint64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if stat, ok := info.Sys().(*syscall.Stat_t); ok {
		return stat.Ino
	}
	return 0
}
