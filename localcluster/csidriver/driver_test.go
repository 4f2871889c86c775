package main

// The Controller and GroupController services against a temporary state directory: what the
// sidecars rely on (idempotent creates, restore from a snapshot, expansion, listing), without
// mounts (the node side needs root and a kubelet: tests/node/test_csi.py proves it there).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const key = "topology.test/node"

func newController(t *testing.T) *controller {
	t.Helper()
	store, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &controller{store: store, node: "node-a", topologyKey: key}
}

func mountCap() []*csi.VolumeCapability {
	return []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}}
}

func create(t *testing.T, c *controller, name string, bytes int64, src *csi.VolumeContentSource) *csi.Volume {
	t.Helper()
	resp, err := c.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: mountCap(), VolumeContentSource: src,
		CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
	})
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return resp.GetVolume()
}

func code(err error) codes.Code { return status.Code(err) }

func TestCreateVolumeIsIdempotentByName(t *testing.T) {
	c := newController(t)
	first := create(t, c, "pvc-1", 1<<20, nil)
	again := create(t, c, "pvc-1", 1<<20, nil)
	if first.GetVolumeId() != again.GetVolumeId() || first.GetVolumeId() != "pvc-1" {
		t.Fatalf("ids %q, %q", first.GetVolumeId(), again.GetVolumeId())
	}
	if got := first.GetAccessibleTopology()[0].GetSegments()[key]; got != "node-a" {
		t.Fatalf("topology %v", first.GetAccessibleTopology())
	}
	info, err := os.Stat(c.store.VolumeDir("pvc-1"))
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory: %v %v", info, err)
	}
	_, err = c.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: mountCap(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20},
	})
	if code(err) != codes.AlreadyExists {
		t.Fatalf("a bigger volume of the same name: %v", err)
	}
}

func TestCreateVolumeRefusesBlockAndOtherNodes(t *testing.T) {
	c := newController(t)
	block := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	if _, err := c.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "b", VolumeCapabilities: block}); code(err) != codes.InvalidArgument {
		t.Fatalf("block: %v", err)
	}
	elsewhere := &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{key: "node-b"}}}}
	if _, err := c.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "x", VolumeCapabilities: mountCap(), AccessibilityRequirements: elsewhere,
	}); code(err) != codes.ResourceExhausted {
		t.Fatalf("another node: %v", err)
	}
}

func TestSnapshotRestoresTheBytes(t *testing.T) {
	c := newController(t)
	create(t, c, "pvc-src", 1<<20, nil)
	data := filepath.Join(c.store.VolumeDir("pvc-src"), "sub", "weights")
	if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte("step 100"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-src"})
	if err != nil {
		t.Fatal(err)
	}
	snap := resp.GetSnapshot()
	if !snap.GetReadyToUse() || snap.GetSizeBytes() != 1<<20 {
		t.Fatalf("snapshot %v", snap)
	}
	// Written after the snapshot: not in it.
	if err := os.WriteFile(data, []byte("step 200"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-other"}); code(err) != codes.AlreadyExists {
		t.Fatalf("same name, another source: %v", err)
	}
	from := &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()},
	}}
	if _, err := c.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-small", VolumeCapabilities: mountCap(), VolumeContentSource: from,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 10},
	}); code(err) != codes.OutOfRange {
		t.Fatalf("smaller than the snapshot: %v", err)
	}
	restored := create(t, c, "pvc-restored", 2<<20, from)
	got, err := os.ReadFile(filepath.Join(c.store.VolumeDir(restored.GetVolumeId()), "sub", "weights"))
	if err != nil || string(got) != "step 100" {
		t.Fatalf("restored %q, %v", got, err)
	}
	capacity, _ := os.ReadFile(filepath.Join(c.store.VolumeDir(restored.GetVolumeId()), CapacityFile))
	if strings.TrimSpace(string(capacity)) != "2097152" {
		t.Fatalf("capacity file %q", capacity)
	}
}

func TestExpandGrowsNeverShrinks(t *testing.T) {
	c := newController(t)
	create(t, c, "pvc-e", 1<<20, nil)
	resp, err := c.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{
		VolumeId: "pvc-e", CapacityRange: &csi.CapacityRange{RequiredBytes: 3 << 20},
	})
	if err != nil || resp.GetCapacityBytes() != 3<<20 || !resp.GetNodeExpansionRequired() {
		t.Fatalf("expand: %v %v", resp, err)
	}
	resp, err = c.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{
		VolumeId: "pvc-e", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20},
	})
	if err != nil || resp.GetCapacityBytes() != 3<<20 {
		t.Fatalf("shrink: %v %v", resp, err)
	}
	n := &node{store: c.store, id: "node-a", topologyKey: key}
	nodeResp, err := n.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{
		VolumeId: "pvc-e", VolumePath: "/unused", CapacityRange: &csi.CapacityRange{RequiredBytes: 3 << 20},
	})
	if err != nil || nodeResp.GetCapacityBytes() != 3<<20 {
		t.Fatalf("node expand: %v %v", nodeResp, err)
	}
	capacity, _ := os.ReadFile(filepath.Join(c.store.VolumeDir("pvc-e"), CapacityFile))
	if strings.TrimSpace(string(capacity)) != "3145728" {
		t.Fatalf("capacity file %q", capacity)
	}
}

func TestListSnapshotsFiltersAndPages(t *testing.T) {
	c := newController(t)
	create(t, c, "pvc-a", 1<<20, nil)
	create(t, c, "pvc-b", 1<<20, nil)
	for _, s := range []struct{ name, source string }{{"s1", "pvc-a"}, {"s2", "pvc-a"}, {"s3", "pvc-b"}} {
		if _, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: s.name, SourceVolumeId: s.source}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{MaxEntries: 2})
	if err != nil || len(page.GetEntries()) != 2 || page.GetNextToken() != "2" {
		t.Fatalf("first page: %v %v", page, err)
	}
	rest, err := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{StartingToken: page.GetNextToken()})
	if err != nil || len(rest.GetEntries()) != 1 || rest.GetNextToken() != "" {
		t.Fatalf("second page: %v %v", rest, err)
	}
	ofA, _ := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{SourceVolumeId: "pvc-a"})
	if len(ofA.GetEntries()) != 2 {
		t.Fatalf("of pvc-a: %v", ofA)
	}
	one, _ := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{SnapshotId: "s3"})
	if len(one.GetEntries()) != 1 || one.GetEntries()[0].GetSnapshot().GetSourceVolumeId() != "pvc-b" {
		t.Fatalf("s3: %v", one)
	}
	if _, err := c.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "s3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "s3"}); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	none, _ := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{SnapshotId: "s3"})
	if len(none.GetEntries()) != 0 {
		t.Fatalf("deleted s3 still listed: %v", none)
	}
}

func TestGroupSnapshotCopiesEveryVolume(t *testing.T) {
	c := newController(t)
	for _, name := range []string{"pvc-r0", "pvc-r1"} {
		create(t, c, name, 1<<20, nil)
		if err := os.WriteFile(filepath.Join(c.store.VolumeDir(name), "rank"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-1", SourceVolumeIds: []string{"pvc-r0", "pvc-r1"}}
	resp, err := c.CreateVolumeGroupSnapshot(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	group := resp.GetGroupSnapshot()
	if !group.GetReadyToUse() || len(group.GetSnapshots()) != 2 {
		t.Fatalf("group %v", group)
	}
	for _, snap := range group.GetSnapshots() {
		got, err := os.ReadFile(filepath.Join(c.store.SnapshotDir(snap.GetSnapshotId()), "rank"))
		if err != nil || string(got) != snap.GetSourceVolumeId() || snap.GetGroupSnapshotId() != group.GetGroupSnapshotId() {
			t.Fatalf("member %v: %q %v", snap, got, err)
		}
	}
	again, err := c.CreateVolumeGroupSnapshot(context.Background(), req)
	if err != nil || again.GetGroupSnapshot().GetSnapshots()[0].GetSnapshotId() != group.GetSnapshots()[0].GetSnapshotId() {
		t.Fatalf("retried create: %v %v", again, err)
	}
	if _, err := c.DeleteVolumeGroupSnapshot(context.Background(), &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: group.GetGroupSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetVolumeGroupSnapshot(context.Background(), &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: group.GetGroupSnapshotId()}); code(err) != codes.NotFound {
		t.Fatalf("deleted group: %v", err)
	}
	left, _ := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{})
	if len(left.GetEntries()) != 0 {
		t.Fatalf("members left: %v", left)
	}
}

func TestIDsNeverLeaveTheStateDirectory(t *testing.T) {
	for _, name := range []string{"../x", "a/b", ".", "..", strings.Repeat("a", 200)} {
		if id := idFor("vol-", name); !validID(id) || strings.Contains(id, "/") {
			t.Fatalf("%q -> %q", name, id)
		}
	}
	c := newController(t)
	if _, err := c.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "../../etc"}); err != nil {
		t.Fatalf("an ID that is not ours: %v", err)
	}
}

func TestTheFailSnapshotsParameterFailsCreateSnapshot(t *testing.T) {
	c := newController(t)
	create(t, c, "pvc-f", 1<<20, nil)
	failing := map[string]string{FailSnapshotsParameter: "true"}
	_, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{
		Name: "snapshot-f", SourceVolumeId: "pvc-f", Parameters: failing,
	})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), FailSnapshotsParameter) {
		t.Fatalf("a snapshot of a failing class: %v", err)
	}
	// Nothing was taken: no record, no copy.
	listed, _ := c.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{})
	if len(listed.GetEntries()) != 0 {
		t.Fatalf("a failed snapshot is listed: %v", listed)
	}
	if _, err := os.Stat(c.store.SnapshotDir("snapshot-f")); !os.IsNotExist(err) {
		t.Fatalf("a failed snapshot left a copy: %v", err)
	}
	// Any other value, or none, takes the snapshot.
	for _, params := range []map[string]string{{FailSnapshotsParameter: "false"}, nil} {
		resp, err := c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{
			Name: "snapshot-ok", SourceVolumeId: "pvc-f", Parameters: params,
		})
		if err != nil || !resp.GetSnapshot().GetReadyToUse() {
			t.Fatalf("parameters %v: %v %v", params, resp, err)
		}
	}
}
