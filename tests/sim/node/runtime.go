package main

// The process container runtime: a CRI v1 RuntimeService + ImageService on a unix socket. A "container" is
// the container's command run as a local process, PID 1 of a PID namespace of its own (so SIGTERM reaches only
// the main process, and a shell without a trap ignores it, as in a real container), with the image's and the
// kubelet's environment, its output written in CRI log format where the kubelet asks, so the real kubelet
// serves `kubectl logs`. Images are names: any image "pulls" except those listed as unpullable.

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const runtimeName = "gpuops-sim-runtime"
const runtimeVersion = "0.1.0"

type sandbox struct {
	id        string
	config    *runtimeapi.PodSandboxConfig
	state     runtimeapi.PodSandboxState
	createdAt int64
	ip        string
}

type container struct {
	id         string
	sandboxID  string
	config     *runtimeapi.ContainerConfig
	imageRef   string
	logPath    string
	workDir    string
	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	process    *os.Process
	exited     chan struct{}
	// After the CDI devices' edits (cdi.go): the environment the image and the kubelet set, and the device nodes.
	env         []string
	deviceNodes []string
	hooks       []cdiHook // the CDI specs' hooks, whose programs must exist when the container starts
}

type processRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	images     map[string]*runtimeapi.Image
	stateDir   string
	toolDir    string
	imageEnv   []string
	unpullable map[string]bool
	readyFile  string
	gpuTable   []realGPU // nil in the simulated cluster; the machine's GPUs on a GPU machine
	cdiDirs    []string  // the node's CDI spec folders (containerd's cdi_spec_dirs)
	ipCounter  int
	idCounter  int
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runRuntime(args []string) error {
	flags := flag.NewFlagSet("runtime", flag.ContinueOnError)
	socket := flags.String("socket", "", "unix socket to serve the CRI on")
	stateDir := flags.String("state-dir", "", "folder for containers' working folders and the image filesystem")
	toolDir := flags.String("tool-dir", "", "folder put first on every container's PATH (the node's nvidia-smi)")
	readyFile := flags.String("not-ready-file", "", "while this file exists the runtime reports RuntimeReady=false")
	gpuTableFile := flags.String("gpu-table", "", "JSON table of this machine's real GPUs: give each container only its own")
	var imageEnv, unpullable, cdiDirs listFlag
	flags.Var(&imageEnv, "image-env", "NAME=VALUE every image sets (repeatable)")
	flags.Var(&cdiDirs, "cdi-spec-dir", "folder of CDI spec files, lowest priority first, as containerd's cdi_spec_dirs (repeatable)")
	flags.Var(&unpullable, "unpullable", "image whose pull fails (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	r := &processRuntime{sandboxes: map[string]*sandbox{}, containers: map[string]*container{},
		images: map[string]*runtimeapi.Image{}, stateDir: *stateDir, toolDir: *toolDir, imageEnv: imageEnv,
		unpullable: map[string]bool{}, readyFile: *readyFile, cdiDirs: cdiDirs}
	for _, image := range unpullable {
		r.unpullable[image] = true
	}
	if *gpuTableFile != "" {
		table, err := loadGPUTable(*gpuTableFile)
		if err != nil {
			return err
		}
		r.gpuTable = table
	}
	for _, dir := range []string{r.imageFsDir(), filepath.Join(r.stateDir, "containers")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	_ = os.Remove(*socket)
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(server, r)
	runtimeapi.RegisterImageServiceServer(server, r)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		// The node goes away: its containers go with it, as when a machine is switched off.
		r.mu.Lock()
		for _, c := range r.containers {
			if c.process != nil && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
				_ = c.process.Signal(syscall.SIGKILL)
			}
		}
		r.mu.Unlock()
		server.Stop()
	}()
	log.Printf("runtime: serving CRI v1 on %s", *socket)
	return server.Serve(listener)
}

func (r *processRuntime) imageFsDir() string { return filepath.Join(r.stateDir, "images") }

func (r *processRuntime) newID(prefix string) string {
	r.idCounter++
	return fmt.Sprintf("%s%08x%012x", prefix, r.idCounter, time.Now().UnixNano()&0xffffffffffff)
}

// --- runtime status -----------------------------------------------------------------------------------

func (r *processRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: runtimeName, RuntimeVersion: runtimeVersion,
		RuntimeApiVersion: "v1"}, nil
}

func (r *processRuntime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	ready := r.readyFile == "" || !exists(r.readyFile)
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: ready}
	if !ready {
		runtimeReady.Reason = "SimulatedRuntimeDown"
		runtimeReady.Message = "the topology marks this node not ready"
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		runtimeReady, {Type: runtimeapi.NetworkReady, Status: true}}}}, nil
}

func (r *processRuntime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

func (r *processRuntime) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// --- sandboxes ----------------------------------------------------------------------------------------

func (r *processRuntime) RunPodSandbox(_ context.Context, request *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ipCounter++
	s := &sandbox{id: r.newID("s"), config: request.Config, state: runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt: time.Now().UnixNano(),
		// Pod IPs are status data only. Loopback-range addresses: should anything ever dial one (a probe), the
		// traffic stays on this machine.
		ip: fmt.Sprintf("127.1.%d.%d", r.ipCounter/250%250, r.ipCounter%250+2)}
	if request.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		s.ip = ""
	}
	if dir := request.Config.LogDirectory; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	r.sandboxes[s.id] = s
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}

func (r *processRuntime) StopPodSandbox(_ context.Context, request *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	s := r.sandboxes[request.PodSandboxId]
	var running []*container
	for _, c := range r.containers {
		if c.sandboxID == request.PodSandboxId && c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, c)
		}
	}
	r.mu.Unlock()
	for _, c := range running {
		r.stop(c, 0)
	}
	if s != nil {
		r.mu.Lock()
		s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.mu.Unlock()
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *processRuntime) RemovePodSandbox(ctx context.Context, request *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if _, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: request.PodSandboxId}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.containers {
		if c.sandboxID == request.PodSandboxId {
			_ = os.RemoveAll(c.workDir)
			delete(r.containers, id)
		}
	}
	delete(r.sandboxes, request.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *processRuntime) sandboxStatus(s *sandbox) *runtimeapi.PodSandboxStatus {
	status := &runtimeapi.PodSandboxStatus{Id: s.id, Metadata: s.config.Metadata, State: s.state, CreatedAt: s.createdAt,
		Labels: s.config.Labels, Annotations: s.config.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()}}}
	if s.ip != "" {
		status.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip}
	}
	return status
}

func (r *processRuntime) PodSandboxStatus(_ context.Context, request *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[request.PodSandboxId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", request.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: r.sandboxStatus(s)}, nil
}

func (r *processRuntime) ListPodSandbox(_ context.Context, request *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	filter := request.Filter
	var items []*runtimeapi.PodSandbox
	for _, s := range r.sandboxes {
		if filter != nil {
			if filter.Id != "" && filter.Id != s.id {
				continue
			}
			if filter.State != nil && filter.State.State != s.state {
				continue
			}
			if !labelsMatch(s.config.Labels, filter.LabelSelector) {
				continue
			}
		}
		items = append(items, &runtimeapi.PodSandbox{Id: s.id, Metadata: s.config.Metadata, State: s.state,
			CreatedAt: s.createdAt, Labels: s.config.Labels, Annotations: s.config.Annotations})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt < items[j].CreatedAt })
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// --- containers ---------------------------------------------------------------------------------------

func (r *processRuntime) CreateContainer(_ context.Context, request *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[request.PodSandboxId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", request.PodSandboxId)
	}
	c := &container{id: r.newID("c"), sandboxID: s.id, config: request.Config, state: runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt: time.Now().UnixNano(), imageRef: imageID(request.Config.GetImage().GetImage()), exited: make(chan struct{})}
	// As containerd: the CDI devices are resolved when the container is created; one that no spec names fails it.
	names, err := cdiDeviceNames(request.Config)
	if err == nil {
		var injection *cdiInjection
		if injection, err = injectCDIDevices(r.cdiDirs, r.baseEnvironment(request.Config), names); err == nil {
			c.env, c.deviceNodes, c.hooks = injection.Env, injection.DeviceNodes, injection.Hooks
			if len(names) > 0 {
				var annotated []string
				for key := range request.Config.GetAnnotations() {
					if strings.HasPrefix(key, "cdi.k8s.io/") {
						annotated = append(annotated, key)
					}
				}
				log.Printf("runtime: container %s: CDI devices %v (%d in the CRI request, annotations %v) -> device nodes %v",
					request.Config.GetMetadata().GetName(), names, len(request.Config.GetCDIDevices()), annotated, injection.DeviceNodes)
			}
		}
	}
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to create containerd container: %v", err)
	}
	if mounts := deviceListMounts(request.Config.Mounts); len(mounts) > 0 {
		var targets []string
		for _, mount := range mounts {
			targets = append(targets, mount.GetHostPath()+" on "+mount.GetContainerPath())
		}
		log.Printf("runtime: container %s: device mounts %v", request.Config.GetMetadata().GetName(), targets)
	}
	if request.Config.LogPath != "" && s.config.LogDirectory != "" {
		c.logPath = filepath.Join(s.config.LogDirectory, request.Config.LogPath)
		if err := os.MkdirAll(filepath.Dir(c.logPath), 0o755); err != nil {
			return nil, err
		}
	}
	c.workDir = filepath.Join(r.stateDir, "containers", c.id)
	if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, err
	}
	r.containers[c.id] = c
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

func (r *processRuntime) StartContainer(_ context.Context, request *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.mu.Lock()
	c, ok := r.containers[request.ContainerId]
	if !ok {
		r.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "container %q not found", request.ContainerId)
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		r.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not in created state", c.id)
	}
	s := r.sandboxes[c.sandboxID]
	r.mu.Unlock()
	// runc runs the CDI specs' hooks before the container's process: a missing hook program fails the start.
	var process *runningProcess
	err := missingHook(c.hooks)
	if err == nil {
		process, err = startProcess(c, s, r.environment(c), r.toolDir, r.gpuTable)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now().UnixNano()
	if err != nil {
		// As containerd: the container exists, exited with 128, reason StartError, and its message is the whole
		// error StartContainer returns (containerd's container_start.go keeps retErr.Error()).
		err = fmt.Errorf("failed to create containerd task: %w", err)
		c.state, c.startedAt, c.finishedAt, c.exitCode = runtimeapi.ContainerState_CONTAINER_EXITED, now, now, 128
		c.reason, c.message = "StartError", err.Error()
		close(c.exited)
		return nil, status.Error(codes.Unknown, err.Error())
	}
	c.process, c.state, c.startedAt = process.proc, runtimeapi.ContainerState_CONTAINER_RUNNING, now
	go func() {
		exitCode := process.wait()
		r.mu.Lock()
		c.state, c.finishedAt, c.exitCode = runtimeapi.ContainerState_CONTAINER_EXITED, time.Now().UnixNano(), exitCode
		c.reason = "Completed"
		if exitCode != 0 {
			c.reason = "Error"
		}
		close(c.exited)
		r.mu.Unlock()
	}()
	return &runtimeapi.StartContainerResponse{}, nil
}

// baseEnvironment: the image's variables, then the kubelet's (which carry the device plugin's), as containerd
// merges them, before any CDI edit.
func (r *processRuntime) baseEnvironment(config *runtimeapi.ContainerConfig) []string {
	values := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	order := []string{"PATH"}
	set := func(name, value string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = value
	}
	for _, entry := range r.imageEnv {
		if name, value, ok := strings.Cut(entry, "="); ok {
			set(name, value)
		}
	}
	for _, kv := range config.Envs {
		set(kv.Key, string(kv.Value))
	}
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+values[name])
	}
	return env
}

// environment: the container's environment after the CDI edits, with HOME its working folder and the node's tools
// first on PATH.
func (r *processRuntime) environment(c *container) []string {
	env := []string{"HOME=" + c.workDir}
	for _, entry := range c.env {
		if value, ok := strings.CutPrefix(entry, "PATH="); ok && r.toolDir != "" {
			entry = "PATH=" + r.toolDir + ":" + value
		}
		if !strings.HasPrefix(entry, "HOME=") {
			env = append(env, entry)
		}
	}
	if len(c.deviceNodes) > 0 && r.gpuTable == nil {
		// No real devices here: the node's nvidia-smi (fake_nvidia_smi.py) reads the device nodes the CDI specs
		// injected from this variable, where a real one would find them in the container's /dev.
		env = append(env, "GPUOPS_SIM_DEVICE_NODES="+strings.Join(c.deviceNodes, ","))
	}
	return env
}

func (r *processRuntime) StopContainer(_ context.Context, request *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	c, ok := r.containers[request.ContainerId]
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", request.ContainerId)
	}
	r.stop(c, request.Timeout)
	return &runtimeapi.StopContainerResponse{}, nil
}

// stop sends SIGTERM to the container's main process only, waits up to timeout seconds, then SIGKILL.
func (r *processRuntime) stop(c *container, timeout int64) {
	r.mu.Lock()
	process, state := c.process, c.state
	r.mu.Unlock()
	if process == nil || state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	if timeout > 0 {
		_ = process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
			return
		case <-time.After(time.Duration(timeout) * time.Second):
		}
	}
	_ = process.Signal(syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
}

func (r *processRuntime) RemoveContainer(_ context.Context, request *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	c, ok := r.containers[request.ContainerId]
	r.mu.Unlock()
	if !ok {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	r.stop(c, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = os.RemoveAll(c.workDir)
	delete(r.containers, c.id)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *processRuntime) containerStatus(c *container) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: c.id, Metadata: c.config.Metadata, State: c.state, CreatedAt: c.createdAt,
		StartedAt: c.startedAt, FinishedAt: c.finishedAt, ExitCode: c.exitCode, Image: c.config.Image, ImageRef: c.imageRef,
		ImageId: c.imageRef, Reason: c.reason, Message: c.message, Labels: c.config.Labels,
		Annotations: c.config.Annotations, LogPath: c.logPath}
}

func (r *processRuntime) ContainerStatus(_ context.Context, request *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[request.ContainerId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", request.ContainerId)
	}
	return &runtimeapi.ContainerStatusResponse{Status: r.containerStatus(c)}, nil
}

func (r *processRuntime) ListContainers(_ context.Context, request *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	filter := request.Filter
	var items []*runtimeapi.Container
	for _, c := range r.containers {
		if filter != nil {
			if filter.Id != "" && filter.Id != c.id {
				continue
			}
			if filter.PodSandboxId != "" && filter.PodSandboxId != c.sandboxID {
				continue
			}
			if filter.State != nil && filter.State.State != c.state {
				continue
			}
			if !labelsMatch(c.config.Labels, filter.LabelSelector) {
				continue
			}
		}
		items = append(items, &runtimeapi.Container{Id: c.id, PodSandboxId: c.sandboxID, Metadata: c.config.Metadata,
			Image: c.config.Image, ImageRef: c.imageRef, ImageId: c.imageRef, State: c.state, CreatedAt: c.createdAt,
			Labels: c.config.Labels, Annotations: c.config.Annotations})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt < items[j].CreatedAt })
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

func (r *processRuntime) UpdateContainerResources(context.Context, *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (r *processRuntime) ReopenContainerLog(context.Context, *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	// Log lines are appended with a fresh open per write batch (see process.go): a rotated file is picked up.
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// Stats: the kubelet's CRI stats provider asks; nothing is measured, so nothing is reported.
func (r *processRuntime) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{}, nil
}

func (r *processRuntime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{}, nil
}

func (r *processRuntime) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

func (r *processRuntime) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// --- images -------------------------------------------------------------------------------------------

func imageID(name string) string {
	return "sha256:" + fmt.Sprintf("%064x", fnv64(name))
}

func fnv64(text string) uint64 {
	hash := uint64(14695981039346656037)
	for i := 0; i < len(text); i++ {
		hash ^= uint64(text[i])
		hash *= 1099511628211
	}
	return hash
}

func (r *processRuntime) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var images []*runtimeapi.Image
	for _, image := range r.images {
		images = append(images, image)
	}
	return &runtimeapi.ListImagesResponse{Images: images}, nil
}

func (r *processRuntime) ImageStatus(_ context.Context, request *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := request.GetImage().GetImage()
	if image, ok := r.images[name]; ok {
		return &runtimeapi.ImageStatusResponse{Image: image}, nil
	}
	for _, image := range r.images {
		if image.Id == name {
			return &runtimeapi.ImageStatusResponse{Image: image}, nil
		}
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (r *processRuntime) PullImage(_ context.Context, request *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name := request.GetImage().GetImage()
	if r.unpullable[name] || strings.HasSuffix(name, ":does-not-exist") {
		return nil, status.Errorf(codes.NotFound, "failed to pull and unpack image %q: not found (simulated registry)", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images[name] = &runtimeapi.Image{Id: imageID(name), RepoTags: []string{name}, Size: 1 << 20}
	return &runtimeapi.PullImageResponse{ImageRef: imageID(name)}, nil
}

func (r *processRuntime) RemoveImage(_ context.Context, request *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := request.GetImage().GetImage()
	for key, image := range r.images {
		if key == name || image.Id == name {
			delete(r.images, key)
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (r *processRuntime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	usage := &runtimeapi.FilesystemUsage{Timestamp: time.Now().UnixNano(),
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: r.imageFsDir()}, UsedBytes: &runtimeapi.UInt64Value{Value: 1 << 20},
		InodesUsed: &runtimeapi.UInt64Value{Value: 1}}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{usage}}, nil
}

func labelsMatch(labels, selector map[string]string) bool {
	for key, value := range selector {
		if labels[key] != value {
			return false
		}
	}
	return true
}
