package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// A server stream that records what is sent, as the kubelet's end of a stream would receive it.
type recordingStream[T any] struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *T
}

func newRecordingStream[T any](ctx context.Context) *recordingStream[T] {
	return &recordingStream[T]{ctx: ctx, sent: make(chan *T, 100)}
}

func (s *recordingStream[T]) Send(message *T) error {
	s.sent <- message
	return nil
}

func (s *recordingStream[T]) Context() context.Context { return s.ctx }

func (s *recordingStream[T]) next(t *testing.T, within time.Duration) *T {
	t.Helper()
	select {
	case message := <-s.sent:
		return message
	case <-time.After(within):
		t.Fatalf("nothing sent within %v", within)
		return nil
	}
}

func writeFaults(t *testing.T, path, faults string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(faults), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The kubeletplugin helper registers the health service, and names it in GetInfo, only for a driver that implements it.
var _ drahealth.DRAResourceHealthServer = &draDriver{}

// healthOf is a DRA health report as pool/device -> health and message.
func healthOf(report *drahealth.NodeWatchResourcesResponse) map[string]string {
	health := map[string]string{}
	for _, device := range report.Devices {
		health[device.Device.PoolName+"/"+device.Device.DeviceName] = device.Health.String() + " " + device.Message
	}
	return health
}

func TestTheHealthReportNamesEveryDeviceByPoolAndNameWithNvidiasMessages(t *testing.T) {
	d := testDriver(t, testGPUs())
	now := time.Unix(1700000000, 0)
	report := d.healthReport(nil, now)
	if got := healthOf(report); len(got) != 2 || got["prod102/gpu-0"] != "HEALTHY " || got["prod102/gpu-2"] != "HEALTHY " {
		t.Errorf("no fault: %v", got)
	}
	if report.Devices[0].LastUpdatedTime != now.Unix() {
		t.Errorf("last updated: %d", report.Devices[0].LastUpdatedTime)
	}
	got := healthOf(d.healthReport(map[string]draHealthFault{"gpu-2": {XID: 79}}, now))
	if got["prod102/gpu-2"] != "UNHEALTHY critical XID 79 reported by NVML" || got["prod102/gpu-0"] != "HEALTHY " {
		t.Errorf("XID 79 on gpu-2: %v", got)
	}
	got = healthOf(d.healthReport(map[string]draHealthFault{"gpu-0": {Health: "Unhealthy"}, "gpu-2": {Health: "Unknown"}}, now))
	if got["prod102/gpu-0"] != "UNHEALTHY GPU is lost" || got["prod102/gpu-2"] != "UNKNOWN device health is not monitored" {
		t.Errorf("lost and unmonitored: %v", got)
	}
}

func TestTheHealthStreamSendsAtOnceOnEveryFaultChangeAndOnTheHeartbeat(t *testing.T) {
	defer func(poll, heartbeat time.Duration) { draHealthPoll, draHealthHeartbeat = poll, heartbeat }(draHealthPoll, draHealthHeartbeat)
	draHealthPoll, draHealthHeartbeat = 10*time.Millisecond, 300*time.Millisecond
	d := testDriver(t, testGPUs())
	ctx, cancel := context.WithCancel(context.Background())
	stream := newRecordingStream[drahealth.NodeWatchResourcesResponse](ctx)
	done := make(chan error)
	go func() { done <- d.NodeWatchResources(&drahealth.NodeWatchResourcesRequest{}, stream) }()

	if got := healthOf(stream.next(t, time.Second)); got["prod102/gpu-2"] != "HEALTHY " {
		t.Errorf("first report: %v", got)
	}
	start := time.Now()
	writeFaults(t, d.faultsFile, `{"dra_health": {"gpu-2": {"xid": 48}}}`)
	if got := healthOf(stream.next(t, time.Second)); got["prod102/gpu-2"] != "UNHEALTHY critical XID 48 reported by NVML" {
		t.Errorf("after the fault: %v", got)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("the change waited for the heartbeat: %v", took)
	}
	start = time.Now()
	if got := healthOf(stream.next(t, time.Second)); got["prod102/gpu-2"] != "UNHEALTHY critical XID 48 reported by NVML" {
		t.Errorf("heartbeat: %v", got)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a report %v after the last one, with nothing changed: not a heartbeat", took)
	}
	writeFaults(t, d.faultsFile, `{}`)
	if got := healthOf(stream.next(t, time.Second)); got["prod102/gpu-2"] != "HEALTHY " {
		t.Errorf("healed: %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the stream ended with %v when the kubelet went", err)
	}
}

// A device that turns Unhealthy while a pod holds it reaches the kubelet through ListAndWatch at once: the kubelet
// then writes it into the pod's allocatedResourcesStatus (and takes it out of allocatable).
func TestListAndWatchSendsTheListAgainWhenADeviceTurnsUnhealthy(t *testing.T) {
	p := testPlugin("envvar", false)
	p.faultsFile = filepath.Join(t.TempDir(), "faults.json")
	p.changed = make(chan struct{}, 1)
	go p.watchFaults()
	time.Sleep(100 * time.Millisecond) // as in the plugin, the watch has read the faults it starts from
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := newRecordingStream[pluginapi.ListAndWatchResponse](ctx)
	go func() { _ = p.ListAndWatch(&pluginapi.Empty{}, stream) }()

	if got := listedHealth(stream.next(t, time.Second)); got["GPU-a"] != pluginapi.Healthy || got["GPU-b"] != pluginapi.Healthy {
		t.Errorf("first list: %v", got)
	}
	writeFaults(t, p.faultsFile, `{"unhealthy": ["GPU-b"]}`)
	if got := listedHealth(stream.next(t, 2*time.Second)); got["GPU-a"] != pluginapi.Healthy || got["GPU-b"] != pluginapi.Unhealthy {
		t.Errorf("after the fault: %v", got)
	}
	writeFaults(t, p.faultsFile, `{}`)
	if got := listedHealth(stream.next(t, 2*time.Second)); got["GPU-b"] != pluginapi.Healthy {
		t.Errorf("healed: %v", got)
	}
}

// A device the faults turn Unhealthy once allocated reads Healthy until the kubelet allocates it, then Unhealthy at
// once: the GPU fails while its pod holds it.
func TestADeviceUnhealthyOnceAllocatedTurnsUnhealthyWhenTheKubeletAllocatesIt(t *testing.T) {
	p := testPlugin("envvar", false)
	p.faultsFile = filepath.Join(t.TempDir(), "faults.json")
	p.changed = make(chan struct{}, 1)
	writeFaults(t, p.faultsFile, `{"unhealthy_once_allocated": ["GPU-b"]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := newRecordingStream[pluginapi.ListAndWatchResponse](ctx)
	go func() { _ = p.ListAndWatch(&pluginapi.Empty{}, stream) }()

	if got := listedHealth(stream.next(t, time.Second)); got["GPU-b"] != pluginapi.Healthy {
		t.Errorf("before the allocation: %v", got)
	}
	allocate(t, p, "GPU-a")
	select {
	case response := <-stream.sent:
		t.Errorf("another device's allocation sent the list again: %v", listedHealth(response))
	case <-time.After(100 * time.Millisecond):
	}
	allocate(t, p, "GPU-b")
	if got := listedHealth(stream.next(t, time.Second)); got["GPU-a"] != pluginapi.Healthy || got["GPU-b"] != pluginapi.Unhealthy {
		t.Errorf("after its allocation: %v", got)
	}
	writeFaults(t, p.faultsFile, `{}`)
	if got := listedHealth(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); got["GPU-b"] != pluginapi.Healthy {
		t.Errorf("healed: %v", got)
	}
}

// listedHealth is a ListAndWatch response as device ID -> health.
func listedHealth(response *pluginapi.ListAndWatchResponse) map[string]string {
	health := map[string]string{}
	for _, device := range response.Devices {
		health[device.ID] = device.Health
	}
	return health
}
