package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// stage is what the Dockerfile says about one stage, with what it inherits from its base.
type stage struct {
	user       string
	entrypoint []string
	copies     map[string]string // destination in the image -> source in the build stage
}

// parseDockerfile reads the stages of the Dockerfile (FROM, USER, ENTRYPOINT, COPY --from).
func parseDockerfile(t *testing.T, file string) map[string]*stage {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]*stage{}
	var cur *stage
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			if len(f) != 4 || !strings.EqualFold(f[2], "AS") {
				t.Fatalf("FROM without a stage name: %q", line)
			}
			cur = &stage{copies: map[string]string{}}
			if base, ok := stages[f[1]]; ok {
				cur.user, cur.entrypoint = base.user, base.entrypoint
				for k, v := range base.copies {
					cur.copies[k] = v
				}
			}
			stages[f[3]] = cur
		case "USER":
			cur.user = f[1]
		case "ENTRYPOINT":
			cur.entrypoint = nil
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))), &cur.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT is not exec form: %q", line)
			}
		case "COPY":
			if strings.HasPrefix(f[1], "--from=") && len(f) == 4 {
				cur.copies[f[3]] = f[2]
			}
		}
	}
	return stages
}

// TestSpecsMatchDockerfile: each image built here has the user, entrypoint, binary path and CA
// bundle of its Dockerfile target, and every final Dockerfile target has an image here.
func TestSpecsMatchDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "../../../Dockerfile")
	targets := map[string]bool{}
	for _, s := range Specs() {
		if s.Target == "" {
			continue
		}
		targets[s.Target] = true
		st, ok := stages[s.Target]
		if !ok {
			t.Errorf("%s: no Dockerfile stage %q", s.Name, s.Target)
			continue
		}
		if st.user != s.User {
			t.Errorf("%s: user %q, Dockerfile %q", s.Name, s.User, st.user)
		}
		if !slices.Equal(st.entrypoint, s.Entrypoint) {
			t.Errorf("%s: entrypoint %q, Dockerfile %q", s.Name, s.Entrypoint, st.entrypoint)
		}
		if src := st.copies[s.Path]; src != "/out/"+s.Binary {
			t.Errorf("%s: %s in the image is the build's %q in the Dockerfile, %q here", s.Name, s.Path, src, "/out/"+s.Binary)
		}
		_, hasCA := st.copies[CABundlePath]
		if hasCA != s.CABundle {
			t.Errorf("%s: CA bundle %v, Dockerfile %v", s.Name, s.CABundle, hasCA)
		}
		if len(st.copies) != len(s.files()) {
			t.Errorf("%s: the Dockerfile copies %v, the image has %v", s.Name, st.copies, s.files())
		}
	}
	for name, st := range stages {
		if name == "build" || name == "runtime" || st.entrypoint == nil {
			continue
		}
		if !targets[name] {
			t.Errorf("Dockerfile target %q has no image in Specs", name)
		}
	}
}

// TestBuiltImages builds every image from stand-in binaries and reads the result back: its
// config (user, entrypoint, platform) and the files of its one layer, then the OCI archive's
// index names it for containerd.
func TestBuiltImages(t *testing.T) {
	bin := t.TempDir()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range Specs() {
		if err := os.WriteFile(filepath.Join(bin, s.Binary), []byte("binary "+s.Name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	for _, s := range Specs() {
		t.Run(s.Name, func(t *testing.T) {
			img, err := Build(s, bin, ca)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != s.User || !slices.Equal(cf.Config.Entrypoint, s.Entrypoint) || cf.OS != "linux" || cf.Architecture != "amd64" {
				t.Errorf("config user=%q entrypoint=%q platform=%s/%s", cf.Config.User, cf.Config.Entrypoint, cf.OS, cf.Architecture)
			}
			if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %q (%v), want OCI", mt, err)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers %d, %v", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got := map[string]string{}
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Typeflag != tar.TypeReg {
					continue
				}
				if h.Uid != 0 || h.Gid != 0 {
					t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
				}
				b, _ := io.ReadAll(tr)
				got["/"+h.Name] = string(b)
				if h.Name == strings.TrimPrefix(s.Path, "/") && h.Mode&0o111 == 0 {
					t.Errorf("%s is not executable: %o", h.Name, h.Mode)
				}
			}
			want := map[string]string{s.Path: "binary " + s.Name}
			if s.CABundle {
				want[CABundlePath] = "-----BEGIN CERTIFICATE-----\ntest\n"
			}
			if len(got) != len(want) {
				t.Errorf("layer files %v, want %v", keys(got), keys(want))
			}
			for p, c := range want {
				if got[p] != c {
					t.Errorf("%s: %q, want %q", p, got[p], c)
				}
			}

			ref := "localhost/switchboard/" + s.Name + ":test"
			archive := filepath.Join(out, s.Name+".tar")
			if err := WriteArchive(img, ref, archive); err != nil {
				t.Fatal(err)
			}
			index := readFromTar(t, archive, "index.json")
			var idx struct {
				Manifests []struct {
					Digest      string            `json:"digest"`
					Annotations map[string]string `json:"annotations"`
				} `json:"manifests"`
			}
			if err := json.Unmarshal(index, &idx); err != nil {
				t.Fatal(err)
			}
			d, _ := img.Digest()
			if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != d.String() || idx.Manifests[0].Annotations["io.containerd.image.name"] != ref {
				t.Errorf("index.json %s, want one manifest %s named %s", index, d, ref)
			}
			if readFromTar(t, archive, "oci-layout") == nil {
				t.Error("no oci-layout file")
			}
		})
	}
}

func readFromTar(t *testing.T, file, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			return nil
		}
		if h.Name == name {
			c, _ := io.ReadAll(tr)
			return c
		}
	}
}

func keys(m map[string]string) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	slices.Sort(k)
	return k
}
