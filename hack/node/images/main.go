// Command images writes Switchboard's container images without a registry or a container
// builder: the static binaries `make build` produces (the same build as the Dockerfile's),
// each in one layer on an empty base with the Dockerfile's user, entrypoint and CA bundle,
// as OCI image archives that `ctr images import` loads. images_test.go keeps the table below
// equal to the Dockerfile.
//
//	go run ./hack/node/images -bin bin -out <dir> -repo localhost/switchboard -tag node
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one image: a static binary on an empty base.
type Spec struct {
	// Name is the image's name under the repository prefix and the Dockerfile target it
	// mirrors ("" Target: not in the Dockerfile).
	Name, Target string
	// Binary is the file in the binaries folder; Path is where it goes in the image.
	Binary, Path string
	Entrypoint   []string
	User         string
	// CABundle: the image carries CABundlePath, as the Dockerfile's runtime stage does.
	CABundle bool
}

// CABundlePath is where the Dockerfile's runtime stage puts the CA bundle (and where Go's
// crypto/x509 looks for it).
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// nonRoot is the distroless "nonroot" user every image runs as.
const nonRoot = "65532:65532"

// Specs lists the images: the Dockerfile's three targets, the pod sandbox (pause) image the
// test node's containerd uses instead of pulling one, and a stdio MCP server for the tests.
func Specs() []Spec {
	return []Spec{
		{Name: "manager", Target: "manager", Binary: "manager", Path: "/manager", Entrypoint: []string{"/manager"}, User: nonRoot, CABundle: true},
		{Name: "sidecar", Target: "sidecar", Binary: "sidecar", Path: "/sidecar", Entrypoint: []string{"/sidecar"}, User: nonRoot, CABundle: true},
		{Name: "sample-server", Target: "sample-server", Binary: "sample-server", Path: "/sample-server",
			Entrypoint: []string{"/sample-server", "--listen=127.0.0.1:8080"}, User: nonRoot, CABundle: true},
		// The upstream pause image's user.
		{Name: "pause", Binary: "pause", Path: "/pause", Entrypoint: []string{"/pause"}, User: "65535:65535"},
		// A stdio MCP server for the tests on real pods: go-sdk's conformance everything-server
		// (pinned in go.mod), which speaks stdio unless given -http.
		{Name: "everything-server", Binary: "everything-server", Path: "/everything-server",
			Entrypoint: []string{"/everything-server"}, User: nonRoot},
	}
}

// epoch is every timestamp in the images, so that the same binaries give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image of s from the binaries in binDir and the CA bundle file caBundle.
func Build(s Spec, binDir, caBundle string) (v1.Image, error) {
	files := map[string]string{}
	for _, p := range s.files() {
		files[p] = caBundle
		if p == s.Path {
			files[p] = filepath.Join(binDir, s.Binary)
		}
	}
	layerTar, err := layerOf(files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	// OCI media types throughout (the empty base would make a Docker v2 manifest).
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.User = s.User
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cf)
}

// layerOf returns a tar of files (image path -> host path): root-owned, parent folders first,
// the way Docker's COPY lays them out; binaries 0755, everything else 0644.
func layerOf(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		var parents []string
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		b, err := os.ReadFile(files[p])
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if p != CABundlePath {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img as an OCI image layout in a tar file at out, named ref: containerd
// takes the name from the io.containerd.image.name annotation, other tools from the OCI
// ref.name one.
func WriteArchive(img v1.Image, ref, out string) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// tarDir writes the files under dir into a tar at out (written whole, then renamed).
func tarDir(dir, out string) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: epoch})
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out + ".tmp")
		return err
	}
	return os.Rename(out+".tmp", out)
}

func main() {
	bin := flag.String("bin", "bin", "Folder with the static binaries (make build) and pause.")
	out := flag.String("out", "", "Folder the OCI archives (<name>.tar) are written to.")
	repo := flag.String("repo", "localhost/switchboard", "Repository prefix of the image names.")
	tag := flag.String("tag", "node", "Tag of every image.")
	ca := flag.String("ca-bundle", CABundlePath, "CA bundle file to put in the images.")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "images: -out is required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for _, s := range Specs() {
		img, err := Build(s, *bin, *ca)
		if err == nil {
			ref := fmt.Sprintf("%s/%s:%s", *repo, s.Name, *tag)
			if err = WriteArchive(img, ref, filepath.Join(*out, s.Name+".tar")); err == nil {
				d, _ := img.Digest()
				fmt.Printf("%s %s %s\n", ref, d, filepath.Join(*out, s.Name+".tar"))
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(1)
		}
	}
}

// files lists the image paths of s's layer.
func (s Spec) files() []string {
	f := []string{s.Path}
	if s.CABundle {
		f = append(f, CABundlePath)
	}
	return f
}
