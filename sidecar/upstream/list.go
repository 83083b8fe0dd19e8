package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// maxUpstreamPages bounds the pages read from one upstream list.
const maxUpstreamPages = 100

// Answer is an upstream response handed back to the client as it
// came (a JSON-RPC error, or a result that is not complete).
type Answer struct {
	Status int
	Msg    []byte
}

// List reads every page of an upstream list. newReq builds the request for
// one upstream cursor ("" for the first page). A method-not-found error is
// an empty list; any other error or a non-complete result comes back as
// pass. private is set when any page said cacheScope "private".
func (u *Client) List(method, member string, newReq func(cursor string) (*http.Request, error)) (items []json.RawMessage, private bool, pass *Answer, err error) {
	cursor := ""
	for range maxUpstreamPages {
		req, err := newReq(cursor)
		if err != nil {
			return nil, false, nil, err
		}
		status, msg, err := u.RoundTrip(req)
		if err != nil {
			return nil, false, nil, err
		}
		if e, ok, _ := wire.Field(msg, "error"); ok {
			if c, ok, _ := wire.Field(e, "code"); ok && string(c) == strconv.Itoa(wire.CodeMethodNotFound) {
				return []json.RawMessage{}, false, nil, nil
			}
			return nil, false, &Answer{status, msg}, nil
		}
		res, ok, _ := wire.Field(msg, "result")
		if !ok || !wire.IsObject(res) {
			return nil, false, nil, fmt.Errorf("upstream %s answered without a result: %s", method, wire.Truncate(msg, 200))
		}
		var page struct {
			ResultType string            `json:"resultType"`
			Items      []json.RawMessage `json:"-"`
			NextCursor *string           `json:"nextCursor"`
			CacheScope string            `json:"cacheScope"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, false, nil, fmt.Errorf("upstream %s result: %w", method, err)
		}
		if page.ResultType != "" && page.ResultType != protocol.ResultComplete {
			return nil, false, &Answer{status, msg}, nil
		}
		raw, _, _ := wire.Field(res, member)
		var got []json.RawMessage
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &got); err != nil {
				return nil, false, nil, fmt.Errorf("upstream %s %s: %w", method, member, err)
			}
		}
		items = append(items, got...)
		private = private || page.CacheScope == catalog.ScopePrivate
		if page.NextCursor == nil || *page.NextCursor == cursor {
			if items == nil {
				items = []json.RawMessage{}
			}
			return items, private, nil, nil
		}
		cursor = *page.NextCursor
	}
	return nil, false, nil, fmt.Errorf("upstream %s has more than %d pages", method, maxUpstreamPages)
}

// clientListRequest builds the upstream request for one page on behalf of a
// client: its headers and body, with params.cursor replaced by the
// upstream's own cursor (or dropped).
