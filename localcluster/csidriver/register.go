package main

// Registration with the kubelet, in place of node-driver-registrar: the kubelet watches its
// plugins_registry directory for sockets, calls GetInfo on each to learn the plugin's type, name
// and endpoint, then NodeGetInfo on that endpoint (labelling the Node with our topology and
// writing the CSINode object), and reports the outcome with NotifyRegistrationStatus.

import (
	"context"
	"log"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// RegisteredLine is printed once the kubelet accepted the driver: the launcher waits for it
// before it starts the sidecars (and a pod could not mount a volume of ours before it).
const RegisteredLine = "registered with the kubelet"

type registrar struct {
	registration.UnimplementedRegistrationServer
	name     string
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type:              registration.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.GetPluginRegistered() {
		// The kubelet refused us (a bad name, a NodeGetInfo it could not use): say why, loudly.
		log.Printf("the kubelet did not register %s: %s", r.name, s.GetError())
		return nil, status.Error(codes.FailedPrecondition, s.GetError())
	}
	log.Printf("%s as %s (endpoint %s)", RegisteredLine, r.name, r.endpoint)
	return &registration.RegistrationStatusResponse{}, nil
}
