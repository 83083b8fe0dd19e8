package overlay

// Observer is told what the overlay does; the sidecar's metrics implement it.
// ServingRevision is called under the overlay's lock, so two revisions'
// calls never interleave.
type Observer interface {
	ServingRevision(revision string)
	CatalogApplied()
	CatalogRejected()
	// CatalogRejecting says whether the newest revision seen is rejected.
	CatalogRejecting(now bool)
	// MissingTools and WithheldTools are how many declared tools the
	// upstream does not list, and how many tool pinning withholds.
	MissingTools(n int)
	WithheldTools(n int)
}

type nopObserver struct{}

func (nopObserver) ServingRevision(string) {}
func (nopObserver) CatalogApplied()        {}
func (nopObserver) CatalogRejected()       {}
func (nopObserver) CatalogRejecting(bool)  {}
func (nopObserver) MissingTools(int)       {}
func (nopObserver) WithheldTools(int)      {}

// PageSize is the page size of the merged lists.
func (o *Overlay) PageSize() int { return o.opts.PageSize }

// Contents serves the ConfigMap and Secret keys the catalog references (nil: none).
func (o *Overlay) Contents() ContentSource { return o.opts.Contents }
