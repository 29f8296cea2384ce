package main

// gpuops-simnode dra-driver: a DRA kubelet plugin for one node's simulated GPUs, driver gpu.nvidia.com, as NVIDIA's
// k8s-dra-driver-gpu behaves towards the kubelet and the API: it registers through the kubelet's plugin
// registration socket (k8s.io/dynamic-resource-allocation/kubeletplugin), publishes the node's GPUs as one pool named
// after the node (one ResourceSlice, owned by the Node), and on NodePrepareResources writes one CDI spec per claim and
// answers its CDI device IDs; NodeUnprepareResources removes the spec. Prepared claims survive a restart (a
// checkpoint in the plugin's data folder), a repeated prepare returns what was prepared, and a device already
// prepared for another claim is refused. It serves the devices' health to the kubelet (dra_health.go).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	"sigs.k8s.io/yaml"
)

// draConfig is written by the sim (tests/sim/nodes.py) from a topology node.
type draConfig struct {
	Node string   `json:"node"`
	GPUs []draGPU `json:"gpus"`
}

// draFaults: keys of the node's faults file (shared with the device plugin) that make the driver misbehave.
type draFaults struct {
	// "first": every prepared device is handed out as the pool's first device's node, whatever was allocated.
	WrongDevice string `json:"dra_wrong_device"`
	// Per device name, a taint the driver publishes on it, as NVIDIA's driver taints a device its health monitor
	// finds failing (gpu.nvidia.com/xid=<XID>, gpu.nvidia.com/gpu-lost; effect NoSchedule unless said otherwise).
	Taints map[string]draTaint `json:"dra_taints"`
	// Per device name, the health the driver reports to the kubelet (dra_health.go); a device not named is Healthy.
	Health map[string]draHealthFault `json:"dra_health"`
}

type draTaint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

type preparedClaim struct {
	Namespace string                 `json:"namespace"`
	Name      string                 `json:"name"`
	Devices   []kubeletplugin.Device `json:"devices"`
}

type draDriver struct {
	drahealth.UnimplementedDRAResourceHealthServer
	node       string
	cdiRoot    string
	checkpoint string
	faultsFile string
	devices    map[string]draDevice
	ordered    []draDevice
	first      draDevice
	mu         sync.Mutex
	prepared   map[types.UID]preparedClaim
}

func runDRADriver(args []string) error {
	flags := flag.NewFlagSet("dra-driver", flag.ContinueOnError)
	configFile := flags.String("config", "", "JSON driver configuration (the node and its GPUs)")
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server")
	kubeletRoot := flags.String("kubelet-root-dir", "", "the node's kubelet --root-dir (plugins_registry/ and plugins/ below it)")
	cdiRoot := flags.String("cdi-root", "", "folder the claims' CDI specs are written to (one the container runtime reads)")
	faultsFile := flags.String("faults", "", "JSON faults file (optional)")
	unregistered := flags.Bool("no-registration", false, "publish the slices but never register with the kubelet "+
		"(as a kubelet plugin whose registration socket is not where the kubelet looks): the kubelet cannot prepare claims")
	if err := flags.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*configFile)
	if err != nil {
		return err
	}
	var config draConfig
	if err := json.Unmarshal(raw, &config); err != nil {
		return fmt.Errorf("%s: %w", *configFile, err)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	registrar := filepath.Join(*kubeletRoot, "plugins_registry")
	dataDir := filepath.Join(*kubeletRoot, "plugins", draDriverName)
	for _, dir := range []string{registrar, dataDir, *cdiRoot} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	driver, err := newDRADriver(config, *cdiRoot, filepath.Join(dataDir, "checkpoint.json"), *faultsFile)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	helper, err := kubeletplugin.Start(ctx, driver,
		kubeletplugin.KubeClient(client), kubeletplugin.NodeName(config.Node), kubeletplugin.DriverName(draDriverName),
		kubeletplugin.RegistrarDirectoryPath(registrar), kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.Serialize(true), kubeletplugin.RegistrationService(!*unregistered))
	if err != nil {
		return err
	}
	defer helper.Stop()
	publish := func(taints map[string]draTaint) error {
		slice := driver.slice(taints)
		return helper.PublishResources(ctx, resourceslice.DriverResources{
			Pools: map[string]resourceslice.Pool{config.Node: {Slices: []resourceslice.Slice{slice}}}})
	}
	taints := driver.faults().Taints
	if err := publish(taints); err != nil {
		return err
	}
	log.Printf("dra-driver: %s publishes %d device(s) on node %s (taints %v); CDI specs in %s", draDriverName,
		len(driver.ordered), config.Node, taints, *cdiRoot)
	// A device taint comes and goes with the faults file, as with NVIDIA's health monitor: the slice is republished.
	for tick := time.NewTicker(500 * time.Millisecond); ; {
		select {
		case <-ctx.Done():
			// As NVIDIA's driver on a clean shutdown: the node's slices go (the kubelet would also remove them when
			// the plugin unregisters).
			tick.Stop()
			return nil
		case <-tick.C:
		}
		if now := driver.faults().Taints; !reflect.DeepEqual(now, taints) {
			if err := publish(now); err != nil {
				return err
			}
			log.Printf("dra-driver: device taints now %v", now)
			taints = now
		}
	}
}

// slice is the node's one ResourceSlice: every device, with the taints that `taints` names.
func (d *draDriver) slice(taints map[string]draTaint) resourceslice.Slice {
	var slice resourceslice.Slice
	for _, device := range d.ordered {
		published := *device.api.DeepCopy()
		if taint, ok := taints[device.name]; ok {
			effect := resourceapi.DeviceTaintEffect(taint.Effect)
			if effect == "" {
				effect = resourceapi.DeviceTaintEffectNoSchedule
			}
			published.Taints = []resourceapi.DeviceTaint{{Key: taint.Key, Value: taint.Value, Effect: effect}}
		}
		slice.Devices = append(slice.Devices, published)
	}
	return slice
}

func newDRADriver(config draConfig, cdiRoot, checkpoint, faultsFile string) (*draDriver, error) {
	d := &draDriver{node: config.Node, cdiRoot: cdiRoot, checkpoint: checkpoint, faultsFile: faultsFile,
		devices: map[string]draDevice{}, prepared: map[types.UID]preparedClaim{}}
	devices := draDevices(config.GPUs)
	if len(devices) == 0 {
		return nil, errors.New("dra-driver: the node has no GPU to publish")
	}
	d.first, d.ordered = devices[0], devices
	for _, device := range devices {
		d.devices[device.name] = device
	}
	if raw, err := os.ReadFile(checkpoint); err == nil {
		if err := json.Unmarshal(raw, &d.prepared); err != nil {
			return nil, fmt.Errorf("%s: %w", checkpoint, err)
		}
	}
	return d, nil
}

func (d *draDriver) faults() draFaults {
	var faults draFaults
	if d.faultsFile != "" {
		if raw, err := os.ReadFile(d.faultsFile); err == nil {
			_ = json.Unmarshal(raw, &faults)
		}
	}
	return faults
}

func (d *draDriver) saveCheckpoint() error {
	raw, err := json.Marshal(d.prepared)
	if err != nil {
		return err
	}
	return writeFileAtomic(d.checkpoint, raw)
}

func (d *draDriver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	results := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		devices, err := d.prepareClaim(claim)
		results[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	return results, d.saveCheckpoint()
}

func (d *draDriver) prepareClaim(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if done, ok := d.prepared[claim.UID]; ok {
		return done.Devices, nil
	}
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s not yet allocated", claim.Namespace, claim.Name)
	}
	inUse := map[string]string{}
	for uid, other := range d.prepared {
		for _, device := range other.Devices {
			inUse[device.DeviceName] = fmt.Sprintf("%s/%s (%s)", other.Namespace, other.Name, uid)
		}
	}
	var picked []draDevice
	var answer []kubeletplugin.Device
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != draDriverName {
			continue
		}
		device, ok := d.devices[result.Device]
		if !ok || result.Pool != d.node {
			return nil, fmt.Errorf("claim %s/%s: device %s of pool %s is not one of this node's devices", claim.Namespace, claim.Name, result.Device, result.Pool)
		}
		if holder, busy := inUse[device.name]; busy {
			return nil, fmt.Errorf("claim %s/%s: device %s is already prepared for claim %s", claim.Namespace, claim.Name, device.name, holder)
		}
		picked = append(picked, device)
		answer = append(answer, kubeletplugin.Device{Requests: []string{result.Request}, PoolName: result.Pool,
			DeviceName: device.name, CDIDeviceIDs: []string{cdiDeviceID(string(claim.UID), device.name)}})
	}
	wrong := d.faults().WrongDevice == "first"
	spec := claimSpec(string(claim.UID), picked, func(device draDevice) draDevice {
		if wrong {
			return d.first
		}
		return device
	})
	raw, err := yaml.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(cdiSpecPath(d.cdiRoot, string(claim.UID)), raw); err != nil {
		return nil, fmt.Errorf("claim %s/%s: write its CDI spec: %w", claim.Namespace, claim.Name, err)
	}
	sort.Slice(answer, func(i, j int) bool { return answer[i].DeviceName < answer[j].DeviceName })
	d.prepared[claim.UID] = preparedClaim{Namespace: claim.Namespace, Name: claim.Name, Devices: answer}
	return answer, nil
}

func (d *draDriver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	results := map[types.UID]error{}
	for _, claim := range claims {
		err := os.Remove(cdiSpecPath(d.cdiRoot, string(claim.UID)))
		if errors.Is(err, os.ErrNotExist) {
			err = nil // not prepared here, or already unprepared: nothing to undo
		}
		if err == nil {
			delete(d.prepared, claim.UID)
		}
		results[claim.UID] = err
	}
	return results, d.saveCheckpoint()
}

func (d *draDriver) HandleError(_ context.Context, err error, msg string) {
	log.Printf("dra-driver: %s: %v", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		os.Exit(1)
	}
}
