package main

// The driver's state on disk. Everything lives under one state directory, so that the node's
// cleanup (which unmounts and deletes the node's directory) takes it all:
//
//	volumes/<id>/          a volume's data: the directory bind-mounted into pods
//	snapshots/<id>/        a snapshot's data: a copy of its volume's directory
//	meta/volumes/<id>.json    what the Kubernetes side asked for (name, size, topology, source)
//	meta/snapshots/<id>.json  the snapshot's source volume, size, time, group
//	meta/groups/<id>.json     a group snapshot: its name and its snapshots
//
// The metadata is a file per object rather than a database: the driver restarts without losing
// anything, and a test (or a person) can read it. A data directory is made under a ".partial"
// name and renamed when complete, so a copy interrupted half-way is never taken for a volume.
//
// Sizes are recorded, not enforced (like the hostPath test provisioner): a volume is a plain
// directory on the host's filesystem. What a pod can see of its size is the capacity file the
// node side writes at the volume's root (CapacityFile).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"
)

// CapacityFile is written at the root of each volume with its size in bytes (decimal): on
// creation, and again by NodeExpandVolume, so a pod sees its volume grow after an expansion.
const CapacityFile = ".csi-capacity"

// Volume is one volume's record.
type Volume struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// The node whose host holds the directory (the topology the volume is accessible from).
	Node string `json:"node"`
	// Where its initial content came from: "snapshot:<id>", "volume:<id>" or "".
	Source string `json:"source,omitempty"`
}

// Snapshot is one snapshot's record.
type Snapshot struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	SourceVolumeID string `json:"sourceVolumeId"`
	// The source volume's capacity when it was taken: the least a restored volume may have.
	SizeBytes int64 `json:"sizeBytes"`
	// Unix nanoseconds.
	CreatedAt int64  `json:"createdAt"`
	GroupID   string `json:"groupId,omitempty"`
}

// Group is a group snapshot's record: the snapshots of several volumes, taken together.
type Group struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	SnapshotIDs []string `json:"snapshotIds"`
	// The source volumes, in the order asked (idempotency compares them).
	SourceVolumeIDs []string `json:"sourceVolumeIds"`
	CreatedAt       int64    `json:"createdAt"`
}

var (
	errNotFound = errors.New("not found")
	// An ID is used as a file name: it must not be able to name anything outside the state
	// directory (no "/", no "..").
	safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// idFor turns a name chosen by the Kubernetes side (pvc-<uid>, snapshot-<uid>) into an ID: the
// name itself when it is a safe file name (readable on disk), else a digest of it. The same name
// always gives the same ID, which makes the create calls idempotent.
func idFor(prefix, name string) string {
	if safeID.MatchString(name) && name != "." && name != ".." {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:12])
}

func validID(id string) bool {
	return safeID.MatchString(id) && id != "." && id != ".."
}

// Store is the state directory. One mutex serialises every change: the sidecars call
// concurrently, and a test driver's simplicity is worth more than parallel copies.
type Store struct {
	root string
	mu   sync.Mutex
}

func NewStore(root string) (*Store, error) {
	for _, dir := range []string{"volumes", "snapshots", "meta/volumes", "meta/snapshots", "meta/groups"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
	}
	return &Store{root: root}, nil
}

func (s *Store) VolumeDir(id string) string   { return filepath.Join(s.root, "volumes", id) }
func (s *Store) SnapshotDir(id string) string { return filepath.Join(s.root, "snapshots", id) }
func (s *Store) metaPath(kind, id string) string {
	return filepath.Join(s.root, "meta", kind, id+".json")
}

func (s *Store) read(kind, id string, into any) error {
	if !validID(id) {
		return errNotFound
	}
	data, err := os.ReadFile(s.metaPath(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// write replaces a record atomically (temporary file, then rename).
func (s *Store) write(kind, id string, record any) error {
	data, err := json.MarshalIndent(record, "", "  ")
	if err != nil {
		return err
	}
	path := s.metaPath(kind, id)
	partial := path + ".partial"
	if err := os.WriteFile(partial, data, 0o644); err != nil {
		return err
	}
	return os.Rename(partial, path)
}

func (s *Store) remove(kind, id string) error {
	err := os.Remove(s.metaPath(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (s *Store) list(kind string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, "meta", kind))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, entry := range entries {
		name := entry.Name()
		if filepath.Ext(name) == ".json" {
			ids = append(ids, name[:len(name)-len(".json")])
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (s *Store) GetVolume(id string) (Volume, error) {
	var v Volume
	err := s.read("volumes", id, &v)
	return v, err
}

func (s *Store) GetSnapshot(id string) (Snapshot, error) {
	var snap Snapshot
	err := s.read("snapshots", id, &snap)
	return snap, err
}

func (s *Store) GetGroup(id string) (Group, error) {
	var g Group
	err := s.read("groups", id, &g)
	return g, err
}

// Snapshots lists every snapshot, sorted by ID.
func (s *Store) Snapshots() ([]Snapshot, error) {
	ids, err := s.list("snapshots")
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, 0, len(ids))
	for _, id := range ids {
		snap, err := s.GetSnapshot(id)
		if errors.Is(err, errNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, nil
}

// CreateVolume makes the volume's directory (a copy of fromDir when it is not empty) and
// its record. The caller checked that no volume of this ID exists.
func (s *Store) CreateVolume(v Volume, fromDir string) error {
	dir := s.VolumeDir(v.ID)
	partial := dir + ".partial"
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	if fromDir != "" {
		if err := copyTree(fromDir, partial); err != nil {
			return fmt.Errorf("copying %s: %w", fromDir, err)
		}
	} else if err := os.Mkdir(partial, 0o777); err != nil {
		return err
	}
	// Any pod user may write, as on a fresh filesystem (the umask would take the bits away).
	if err := os.Chmod(partial, 0o777); err != nil {
		return err
	}
	if err := writeCapacity(partial, v.CapacityBytes); err != nil {
		return err
	}
	if err := os.Rename(partial, dir); err != nil {
		return err
	}
	return s.write("volumes", v.ID, v)
}

// DeleteVolume removes the record first, then the data: a crash in between leaves a directory
// nobody refers to, never a record whose data is half gone.
func (s *Store) DeleteVolume(id string) error {
	if err := s.remove("volumes", id); err != nil {
		return err
	}
	return os.RemoveAll(s.VolumeDir(id))
}

func (s *Store) SaveVolume(v Volume) error { return s.write("volumes", v.ID, v) }

// TakeSnapshot copies a volume's directory and records the snapshot.
func (s *Store) TakeSnapshot(snap Snapshot) error {
	dir := s.SnapshotDir(snap.ID)
	partial := dir + ".partial"
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	if err := copyTree(s.VolumeDir(snap.SourceVolumeID), partial); err != nil {
		return fmt.Errorf("copying volume %s: %w", snap.SourceVolumeID, err)
	}
	if err := os.Rename(partial, dir); err != nil {
		return err
	}
	return s.write("snapshots", snap.ID, snap)
}

func (s *Store) DeleteSnapshot(id string) error {
	if err := s.remove("snapshots", id); err != nil {
		return err
	}
	return os.RemoveAll(s.SnapshotDir(id))
}

func (s *Store) SaveGroup(g Group) error     { return s.write("groups", g.ID, g) }
func (s *Store) DeleteGroup(id string) error { return s.remove("groups", id) }

func writeCapacity(dir string, bytes int64) error {
	path := filepath.Join(dir, CapacityFile)
	partial := path + ".partial"
	if err := os.WriteFile(partial, []byte(strconv.FormatInt(bytes, 10)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(partial, path)
}

// copyTree copies a directory tree: regular files, directories and symbolic links, with their
// permission bits and modification times. Anything else (devices, sockets) is skipped: a
// volume's data is files.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		info, err := entry.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := os.Mkdir(target, mode.Perm()); err != nil {
				return err
			}
			// Mkdir is subject to the umask.
			return os.Chmod(target, mode.Perm())
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode.IsRegular():
			return copyFile(path, target, info)
		default:
			return nil
		}
	})
}

func copyFile(from, to string, info fs.FileInfo) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(to, info.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(to, info.ModTime(), info.ModTime())
}

// usage sums the sizes of the regular files under a directory and counts its entries.
func usage(dir string) (bytes, inodes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		inodes++
		if entry.Type().IsRegular() {
			info, err := entry.Info()
			if err != nil {
				return err
			}
			bytes += info.Size()
		}
		return nil
	})
	return bytes, inodes, err
}

func now() int64 { return time.Now().UnixNano() }

func timeOf(nanos int64) time.Time { return time.Unix(0, nanos) }
