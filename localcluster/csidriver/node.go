package main

// The Node service, as the kubelet calls it. There is no staging step (no STAGE_UNSTAGE
// capability): a directory needs no device attached or formatted, so the kubelet publishes
// straight onto the pod's target path, with a bind mount of the volume's directory.

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type node struct {
	csi.UnimplementedNodeServer
	store       *Store
	id          string
	topologyKey string
}

// NodeGetInfo tells the kubelet the node's ID and topology: it labels the Node with the
// topology key and records both in the CSINode object, which is what the external-provisioner
// reads to choose where a volume goes.
func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.id,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{n.topologyKey: n.id}},
	}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n *node) volume(id string) (Volume, error) {
	if id == "" {
		return Volume{}, status.Error(codes.InvalidArgument, "a volume ID is required")
	}
	v, err := n.store.GetVolume(id)
	if errors.Is(err, errNotFound) {
		return Volume{}, status.Errorf(codes.NotFound, "volume %s not found", id)
	} else if err != nil {
		return Volume{}, internal(err)
	}
	return v, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "a target path is required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	volume, err := n.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, internal(err)
	}
	if mounted { // published already (the kubelet retries)
		return &csi.NodePublishVolumeResponse{}, nil
	}
	// The kubelet makes the target's parent; the target itself is ours to make.
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, internal(err)
	}
	if err := syscall.Mount(n.store.VolumeDir(volume.ID), target, "", syscall.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount of volume %s on %s: %v", volume.ID, target, err)
	}
	if req.GetReadonly() {
		// A bind mount takes the read-only flag only on a remount.
		flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY)
		if err := syscall.Mount("", target, "", flags, ""); err != nil {
			_ = syscall.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "read-only remount of %s: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" || req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID and a target path are required")
	}
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, internal(err)
	}
	if mounted {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount of %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, internal(err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume is where a pod sees its volume grow: the capacity file at the volume's root
// gets the new size. (A directory has no filesystem of its own to resize.)
func (n *node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	n.store.mu.Lock()
	defer n.store.mu.Unlock()
	volume, err := n.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	capacity := max(volume.CapacityBytes, req.GetCapacityRange().GetRequiredBytes())
	if err := writeCapacity(n.store.VolumeDir(volume.ID), capacity); err != nil {
		return nil, internal(err)
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: capacity}, nil
}

// NodeGetVolumeStats reports the recorded size as the total and the files' sizes as used: what
// the kubelet exports as kubelet_volume_stats_* for the claim.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume path is required")
	}
	volume, err := n.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	used, inodes, err := usage(n.store.VolumeDir(volume.ID))
	if err != nil {
		return nil, internal(err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: volume.CapacityBytes, Used: used, Available: max(0, volume.CapacityBytes-used)},
		{Unit: csi.VolumeUsage_INODES, Used: inodes},
	}}, nil
}

// isMountPoint says whether a path is a mount point, from the kernel's mount table (a bind
// mount of a directory of the same filesystem has the same device number as its parent, so
// comparing stat results would not tell).
func isMountPoint(path string) (bool, error) {
	clean := filepath.Clean(path)
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": field 5 is the
		// mount point, with spaces and the like octal-escaped.
		fields := strings.Fields(scanner.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == clean {
			return true, nil
		}
	}
	return false, scanner.Err()
}

func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if code, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(code))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
