// Command sjs-csi-driver is the project's own CSI driver for the real node of the local cluster
// (issue 37). It exists so that the Kubernetes storage stack (external-provisioner,
// external-resizer, snapshot-controller, csi-snapshotter and the kubelet's CSI volume plugin)
// runs for real here, with no cloud and no block devices: volumes are directories under a state
// directory on the node's host, a pod gets one by bind mount, a snapshot is a copy, a group
// snapshot is copies taken in one call, and sizes are recorded, not enforced.
//
// One process serves every CSI service (Identity, Controller, GroupController, Node) on one unix
// socket, and registers itself with the kubelet on a second socket (the kubelet's plugin
// registration API), so no node-driver-registrar is needed. It runs as a host process, as root,
// beside the kubelet: a bind mount needs the host's mount namespace.
//
//	sjs-csi-driver --endpoint=/path/csi.sock --state-dir=/path/state --node-id=real-node-0 \
//	    --registration-dir=<kubelet root>/plugins_registry
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Version is the driver's vendor version (GetPluginInfo).
const Version = "0.1.0"

func main() {
	var (
		name        = flag.String("name", "csi.stateful-jobset.local", "the driver's name (the CSIDriver object's and the storage classes' provisioner)")
		endpoint    = flag.String("endpoint", "", "unix socket path the CSI services listen on")
		stateDir    = flag.String("state-dir", "", "where volumes, snapshots and their records live")
		nodeID      = flag.String("node-id", "", "the Kubernetes node this runs on")
		topologyKey = flag.String("topology-key", "topology.csi.stateful-jobset.local/node", "the node label naming where a volume lives")
		registryDir = flag.String("registration-dir", "", "the kubelet's plugins_registry directory (empty: do not register)")
	)
	flag.Parse()
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	if *endpoint == "" || *stateDir == "" || *nodeID == "" {
		log.Fatal("--endpoint, --state-dir and --node-id are required")
	}
	if err := run(*name, *endpoint, *stateDir, *nodeID, *topologyKey, *registryDir); err != nil {
		log.Fatal(err)
	}
}

// listen removes a socket left by an earlier run (a unix socket's file outlives its listener)
// and listens on the path.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

func run(name, endpoint, stateDir, nodeID, topologyKey, registryDir string) error {
	store, err := NewStore(stateDir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	server := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	ctrl := &controller{store: store, node: nodeID, topologyKey: topologyKey}
	csi.RegisterIdentityServer(server, &identity{name: name, version: Version})
	csi.RegisterControllerServer(server, ctrl)
	csi.RegisterGroupControllerServer(server, ctrl)
	csi.RegisterNodeServer(server, &node{store: store, id: nodeID, topologyKey: topologyKey})
	listener, err := listen(endpoint)
	if err != nil {
		return fmt.Errorf("CSI endpoint: %w", err)
	}
	errs := make(chan error, 2)
	go func() { errs <- server.Serve(listener) }()
	log.Printf("serving CSI (%s %s, node %s) on %s", name, Version, nodeID, endpoint)

	var registry *grpc.Server
	if registryDir != "" {
		// The kubelet finds the socket by watching the directory: it must appear only once it
		// answers, so it is made after the CSI endpoint serves.
		socket := filepath.Join(registryDir, "sjs-csi.sock")
		regListener, err := listen(socket)
		if err != nil {
			server.Stop()
			return fmt.Errorf("registration socket: %w", err)
		}
		registry = grpc.NewServer()
		registration.RegisterRegistrationServer(registry, &registrar{name: name, endpoint: endpoint})
		go func() { errs <- registry.Serve(regListener) }()
		log.Printf("registration socket %s", socket)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-signals:
		log.Printf("%s: stopping", sig)
	case err := <-errs:
		log.Printf("a server stopped: %v", err)
	}
	// The registration socket goes first: the kubelet then unregisters the driver.
	if registry != nil {
		registry.Stop()
	}
	stopped := make(chan struct{})
	go func() { server.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		server.Stop()
	}
	return nil
}

// logCalls logs each call and its outcome: what the sidecars and the kubelet asked is then in
// the driver's log, next to what it answered.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	began := time.Now()
	resp, err := handler(ctx, req)
	method := filepath.Base(info.FullMethod)
	switch method {
	case "Probe", "NodeGetCapabilities", "NodeGetVolumeStats", "GetPluginInfo", "GetPluginCapabilities", "ControllerGetCapabilities":
		if err != nil {
			log.Printf("%s failed: %v", method, err)
		}
		return resp, err // frequent and uninteresting when they succeed
	}
	if err != nil {
		log.Printf("%s %v -> error %v (%s)", method, req, err, time.Since(began).Round(time.Millisecond))
	} else {
		log.Printf("%s %v -> %v (%s)", method, req, resp, time.Since(began).Round(time.Millisecond))
	}
	return resp, err
}
