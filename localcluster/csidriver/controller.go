package main

// The Controller and GroupController services: volumes, expansion and snapshots, as the
// external-provisioner, the external-resizer and the csi-snapshotter call them.
//
// Every create is idempotent by name (a sidecar retries a call whose answer it lost): the same
// name returns the same object when the request is compatible, else ALREADY_EXISTS. Every
// delete of something already gone succeeds.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A volume asked for without a size gets this much (recorded only).
const defaultCapacity = 1 << 30

// FailSnapshotsParameter is a test knob: a VolumeSnapshotClass with this parameter set to "true"
// (the csi-snapshotter passes a class's parameters to CreateSnapshot) makes every CreateSnapshot
// of that class fail with FAILED_PRECONDITION, so the node tier can prove what a failed snapshot
// does (the node profile's class csi-snapshot-failing). Nothing is copied or recorded.
const FailSnapshotsParameter = "csi.stateful-jobset.local/fail-snapshots"

type controller struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedGroupControllerServer
	store *Store
	// The one node whose host holds the directories, and the topology key naming it.
	node        string
	topologyKey string
}

func (c *controller) topology() []*csi.Topology {
	return []*csi.Topology{{Segments: map[string]string{c.topologyKey: c.node}}}
}

// placeable says whether the accessibility requirements admit our node. The provisioner sends
// the node the scheduler picked (WaitForFirstConsumer) or every node that has the driver
// (Immediate): ours must be among the requisite segments when there are any.
func (c *controller) placeable(req *csi.TopologyRequirement) bool {
	if req == nil || len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if node, ok := t.GetSegments()[c.topologyKey]; ok && node == c.node {
			return true
		}
	}
	return false
}

// checkCapabilities refuses what a directory cannot be: a raw block device. Every access mode is
// accepted: the directory is on the one node, and several pods may mount it.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, capability := range caps {
		if capability.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "block volumes are not supported: volumes are directories")
		}
		if capability.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "an access type (mount) is required")
		}
	}
	return nil
}

// requestedBytes reads a capacity range: the required bytes, else the limit, else the default.
func requestedBytes(r *csi.CapacityRange) (int64, error) {
	required, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 {
		return 0, status.Error(codes.InvalidArgument, "negative capacity")
	}
	if limit > 0 && required > limit {
		return 0, status.Errorf(codes.OutOfRange, "required %d bytes exceeds the limit %d", required, limit)
	}
	switch {
	case required > 0:
		return required, nil
	case limit > 0:
		return min(limit, int64(defaultCapacity)), nil
	default:
		return defaultCapacity, nil
	}
}

func sourceOf(src *csi.VolumeContentSource) string {
	switch {
	case src.GetSnapshot() != nil:
		return "snapshot:" + src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		return "volume:" + src.GetVolume().GetVolumeId()
	default:
		return ""
	}
}

func internal(err error) error {
	return status.Error(codes.Internal, err.Error())
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "a name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	capacity, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if !c.placeable(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted,
			"volumes of this driver live on node %s only, which the topology requirement excludes", c.node)
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()

	id := idFor("vol-", req.GetName())
	source := sourceOf(req.GetVolumeContentSource())
	existing, err := c.store.GetVolume(id)
	switch {
	case err == nil:
		limit := req.GetCapacityRange().GetLimitBytes()
		if existing.Name != req.GetName() || existing.Source != source ||
			existing.CapacityBytes < capacity || (limit > 0 && existing.CapacityBytes > limit) {
			return nil, status.Errorf(codes.AlreadyExists,
				"volume %s exists with another size or source (%d bytes, source %q)", id, existing.CapacityBytes, existing.Source)
		}
		return c.created(existing, req.GetVolumeContentSource()), nil
	case !errors.Is(err, errNotFound):
		return nil, internal(err)
	}

	from := ""
	if snap := req.GetVolumeContentSource().GetSnapshot(); snap != nil {
		found, err := c.store.GetSnapshot(snap.GetSnapshotId())
		if errors.Is(err, errNotFound) {
			return nil, status.Errorf(codes.NotFound, "snapshot %s not found", snap.GetSnapshotId())
		} else if err != nil {
			return nil, internal(err)
		}
		if found.SizeBytes > capacity {
			return nil, status.Errorf(codes.OutOfRange,
				"snapshot %s holds %d bytes, more than the %d asked for", found.ID, found.SizeBytes, capacity)
		}
		from = c.store.SnapshotDir(found.ID)
	} else if vol := req.GetVolumeContentSource().GetVolume(); vol != nil {
		found, err := c.store.GetVolume(vol.GetVolumeId())
		if errors.Is(err, errNotFound) {
			return nil, status.Errorf(codes.NotFound, "volume %s not found", vol.GetVolumeId())
		} else if err != nil {
			return nil, internal(err)
		}
		if found.CapacityBytes > capacity {
			return nil, status.Errorf(codes.OutOfRange,
				"volume %s holds %d bytes, more than the %d asked for", found.ID, found.CapacityBytes, capacity)
		}
		from = c.store.VolumeDir(found.ID)
	}
	volume := Volume{ID: id, Name: req.GetName(), CapacityBytes: capacity, Node: c.node, Source: source}
	if err := c.store.CreateVolume(volume, from); err != nil {
		return nil, internal(err)
	}
	return c.created(volume, req.GetVolumeContentSource()), nil
}

func (c *controller) created(v Volume, src *csi.VolumeContentSource) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: c.topology(),
		ContentSource:      src,
	}}
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID is required")
	}
	if !validID(req.GetVolumeId()) {
		return &csi.DeleteVolumeResponse{}, nil // never one of ours: already gone
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	if err := c.store.DeleteVolume(req.GetVolumeId()); err != nil {
		return nil, internal(err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume records the new size; the node side (NodeExpandVolume) then makes it
// visible in the volume, so node expansion is required.
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID is required")
	}
	capacity, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	volume, err := c.store.GetVolume(req.GetVolumeId())
	if errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	} else if err != nil {
		return nil, internal(err)
	}
	if capacity > volume.CapacityBytes { // never shrinks
		volume.CapacityBytes = capacity
		if err := c.store.SaveVolume(volume); err != nil {
			return nil, internal(err)
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: volume.CapacityBytes, NodeExpansionRequired: true}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "a volume ID and capabilities are required")
	}
	if _, err := c.store.GetVolume(req.GetVolumeId()); errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	} else if err != nil {
		return nil, internal(err)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (c *controller) toCSI(snap Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:      snap.ID,
		SourceVolumeId:  snap.SourceVolumeID,
		SizeBytes:       snap.SizeBytes,
		CreationTime:    timestamppb.New(timeOf(snap.CreatedAt)),
		ReadyToUse:      true, // the copy is complete before the record exists
		GroupSnapshotId: snap.GroupID,
	}
}

// snapshot copies one volume (under the store's lock, held by the caller).
func (c *controller) snapshot(id, name, source, group string) (Snapshot, error) {
	volume, err := c.store.GetVolume(source)
	if errors.Is(err, errNotFound) {
		return Snapshot{}, status.Errorf(codes.NotFound, "volume %s not found", source)
	} else if err != nil {
		return Snapshot{}, internal(err)
	}
	snap := Snapshot{
		ID: id, Name: name, SourceVolumeID: source, SizeBytes: volume.CapacityBytes,
		CreatedAt: now(), GroupID: group,
	}
	if err := c.store.TakeSnapshot(snap); err != nil {
		return Snapshot{}, internal(err)
	}
	return snap, nil
}

func (c *controller) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" || req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a name and a source volume ID are required")
	}
	if req.GetParameters()[FailSnapshotsParameter] == "true" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"snapshot %s of volume %s refused on purpose: its VolumeSnapshotClass sets %s=true (a test knob)",
			req.GetName(), req.GetSourceVolumeId(), FailSnapshotsParameter)
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	id := idFor("snap-", req.GetName())
	existing, err := c.store.GetSnapshot(id)
	switch {
	case err == nil:
		if existing.SourceVolumeID != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists,
				"snapshot %s exists, of volume %s", id, existing.SourceVolumeID)
		}
		return &csi.CreateSnapshotResponse{Snapshot: c.toCSI(existing)}, nil
	case !errors.Is(err, errNotFound):
		return nil, internal(err)
	}
	snap, err := c.snapshot(id, req.GetName(), req.GetSourceVolumeId(), "")
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: c.toCSI(snap)}, nil
}

func (c *controller) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a snapshot ID is required")
	}
	if !validID(req.GetSnapshotId()) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	if err := c.store.DeleteSnapshot(req.GetSnapshotId()); err != nil {
		return nil, internal(err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots answers one snapshot by ID, or those of a source volume, or all; paged by
// position in ID order (the token is the index of the next entry).
func (c *controller) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	c.store.mu.Lock()
	all, err := c.store.Snapshots()
	c.store.mu.Unlock()
	if err != nil {
		return nil, internal(err)
	}
	var matching []Snapshot
	for _, snap := range all {
		if req.GetSnapshotId() != "" && snap.ID != req.GetSnapshotId() {
			continue
		}
		if req.GetSourceVolumeId() != "" && snap.SourceVolumeID != req.GetSourceVolumeId() {
			continue
		}
		matching = append(matching, snap)
	}
	start := 0
	if token := req.GetStartingToken(); token != "" {
		parsed, err := strconv.Atoi(token)
		if err != nil || parsed < 0 || parsed > len(matching) {
			return nil, status.Errorf(codes.Aborted, "invalid starting token %q", token)
		}
		start = parsed
	}
	end := len(matching)
	if max := int(req.GetMaxEntries()); max > 0 && start+max < end {
		end = start + max
	}
	response := &csi.ListSnapshotsResponse{}
	for _, snap := range matching[start:end] {
		response.Entries = append(response.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: c.toCSI(snap)})
	}
	if end < len(matching) {
		response.NextToken = strconv.Itoa(end)
	}
	return response, nil
}

// ----------------------------------------------------------------------- group snapshots

func (c *controller) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
		}},
	}}}, nil
}

// memberID names the snapshot of one volume in a group: derived from both, so a retried create
// finds the same snapshots.
func memberID(group, volume string) string {
	sum := sha256.Sum256([]byte(group + "/" + volume))
	return "snap-" + hex.EncodeToString(sum[:12])
}

func (c *controller) group(g Group) (*csi.VolumeGroupSnapshot, error) {
	out := &csi.VolumeGroupSnapshot{
		GroupSnapshotId: g.ID,
		CreationTime:    timestamppb.New(timeOf(g.CreatedAt)),
		ReadyToUse:      true,
	}
	for _, id := range g.SnapshotIDs {
		snap, err := c.store.GetSnapshot(id)
		if err != nil {
			return nil, internal(fmt.Errorf("snapshot %s of group %s: %w", id, g.ID, err))
		}
		out.Snapshots = append(out.Snapshots, c.toCSI(snap))
	}
	return out, nil
}

// CreateVolumeGroupSnapshot copies every source volume while holding the store's lock, so no
// other call of this driver changes them in between. Pods may still write while the copies are
// made: the driver cannot freeze a plain directory, so "consistent" means one call, one moment
// as far as the driver is concerned (a real storage system would cut all volumes atomically).
func (c *controller) CreateVolumeGroupSnapshot(_ context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if req.GetName() == "" || len(req.GetSourceVolumeIds()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "a name and source volume IDs are required")
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	id := idFor("group-", req.GetName())
	existing, err := c.store.GetGroup(id)
	switch {
	case err == nil:
		if !sameSet(existing.SourceVolumeIDs, req.GetSourceVolumeIds()) {
			return nil, status.Errorf(codes.AlreadyExists,
				"group snapshot %s exists, of volumes %v", id, existing.SourceVolumeIDs)
		}
		out, err := c.group(existing)
		if err != nil {
			return nil, err
		}
		return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
	case !errors.Is(err, errNotFound):
		return nil, internal(err)
	}
	g := Group{ID: id, Name: req.GetName(), SourceVolumeIDs: req.GetSourceVolumeIds(), CreatedAt: now()}
	for _, volume := range req.GetSourceVolumeIds() {
		member := memberID(id, volume)
		if _, err := c.snapshot(member, member, volume, id); err != nil {
			// Leave nothing half made: the snapshots taken so far go.
			for _, taken := range g.SnapshotIDs {
				_ = c.store.DeleteSnapshot(taken)
			}
			return nil, err
		}
		g.SnapshotIDs = append(g.SnapshotIDs, member)
	}
	if err := c.store.SaveGroup(g); err != nil {
		return nil, internal(err)
	}
	out, err := c.group(g)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
}

func (c *controller) DeleteVolumeGroupSnapshot(_ context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	if req.GetGroupSnapshotId() == "" {
		return nil, status.Error(codes.InvalidArgument, "a group snapshot ID is required")
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	members := req.GetSnapshotIds()
	if g, err := c.store.GetGroup(req.GetGroupSnapshotId()); err == nil {
		members = append(members, g.SnapshotIDs...)
	} else if !errors.Is(err, errNotFound) {
		return nil, internal(err)
	}
	for _, id := range members {
		if !validID(id) {
			continue
		}
		if err := c.store.DeleteSnapshot(id); err != nil {
			return nil, internal(err)
		}
	}
	if validID(req.GetGroupSnapshotId()) {
		if err := c.store.DeleteGroup(req.GetGroupSnapshotId()); err != nil {
			return nil, internal(err)
		}
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

func (c *controller) GetVolumeGroupSnapshot(_ context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	g, err := c.store.GetGroup(req.GetGroupSnapshotId())
	if errors.Is(err, errNotFound) {
		return nil, status.Errorf(codes.NotFound, "group snapshot %s not found", req.GetGroupSnapshotId())
	} else if err != nil {
		return nil, internal(err)
	}
	out, err := c.group(g)
	if err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
