package metrics

// The overlay's Observer (overlay.Observer): what the live catalog counts.

// ServingRevision makes revision the one series of catalog_revision_info.
// Overlay.Apply calls it under Overlay.pendMu, so Reset and Set are not interleaved.
func (m *Metrics) ServingRevision(revision string) {
	m.catalogRevision.Reset()
	m.catalogRevision.WithLabelValues(revision).Set(1)
}

// CatalogApplied counts an applied revision.
func (m *Metrics) CatalogApplied() { m.catalogApplied.Inc() }

// CatalogRejected counts a rejected revision.
func (m *Metrics) CatalogRejected() { m.catalogRejected.Inc() }

// CatalogRejecting says whether the newest revision seen is rejected.
func (m *Metrics) CatalogRejecting(now bool) {
	v := 0.0
	if now {
		v = 1
	}
	m.catalogRejectedNow.Set(v)
}

// MissingTools sets how many declared tools the upstream does not list.
func (m *Metrics) MissingTools(n int) { m.catalogMissingTools.Set(float64(n)) }

// WithheldTools sets how many tools pinning withholds.
func (m *Metrics) WithheldTools(n int) { m.catalogWithheldTools.Set(float64(n)) }
