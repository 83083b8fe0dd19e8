package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r as one line of JSON, the same bytes encoding/json writes for it (with
// HTML escaping off), without reflection and without checking Arguments a second time when
// they are what a Redactor returns (compact JSON). Arguments that are not compact JSON are
// compacted; arguments that are not JSON become the Truncated marker.
func AppendJSON(b []byte, r *Record) []byte {
	b = append(b, `{"schema":`...)
	b = appendString(b, r.Schema)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","server":{"namespace":`...)
	b = appendString(b, r.Server.Namespace)
	b = append(b, `,"name":`...)
	b = appendString(b, r.Server.Name)
	b = append(b, '}')
	b = appendField(b, "pod", r.Pod)
	if c := r.Caller; c != nil {
		b = append(b, `,"caller":{"subject":`...)
		b = appendString(b, c.Subject)
		b = appendField(b, "serviceAccount", c.ServiceAccount)
		if len(c.Groups) > 0 {
			b = append(b, `,"groups":[`...)
			for i, g := range c.Groups {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, g)
			}
			b = append(b, ']')
		}
		b = appendField(b, "issuer", c.Issuer)
		b = append(b, '}')
	}
	b = appendField(b, "protocolVersion", r.ProtocolVersion)
	b = append(b, `,"method":`...)
	b = appendString(b, r.Method)
	b = appendField(b, "name", r.Name)
	b = appendField(b, "upstreamName", r.UpstreamName)
	b = appendField(b, "catalogRevision", r.CatalogRevision)
	b = append(b, `,"decision":{"allowed":`...)
	b = strconv.AppendBool(b, r.Decision.Allowed)
	b = append(b, `,"reason":`...)
	b = appendString(b, r.Decision.Reason)
	b = appendField(b, "policy", r.Decision.Policy)
	b = append(b, `},"outcome":{"status":`...)
	o := r.Outcome
	b = appendString(b, o.Status)
	if o.ErrorCode != 0 {
		b = append(b, `,"errorCode":`...)
		b = strconv.AppendInt(b, int64(o.ErrorCode), 10)
	}
	if o.IsError {
		b = append(b, `,"isError":true`...)
	}
	if o.InputRequiredRounds != 0 {
		b = append(b, `,"inputRequiredRounds":`...)
		b = strconv.AppendInt(b, int64(o.InputRequiredRounds), 10)
	}
	if o.InputRequired {
		b = append(b, `,"inputRequired":true`...)
	}
	b = append(b, `},"durationMs":`...)
	b = appendFloat(b, r.DurationMs)
	if len(r.RequestID) > 0 {
		b = append(b, `,"requestId":`...)
		b = appendRaw(b, r.RequestID)
	}
	b = appendField(b, "traceId", r.TraceID)
	if len(r.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = appendRaw(b, r.Arguments)
	}
	if r.ArgumentsTruncated {
		b = append(b, `,"argumentsTruncated":true`...)
	}
	if r.DroppedBefore != 0 {
		b = append(b, `,"droppedBefore":`...)
		b = strconv.AppendUint(b, r.DroppedBefore, 10)
	}
	return append(b, '}', '\n')
}

// appendField appends ,"name":"v" unless v is empty (omitempty).
func appendField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendRaw appends a raw JSON value: as it is when it is compact JSON (checked in one pass),
// else compacted the way encoding/json does, else the Truncated marker.
func appendRaw(b []byte, raw []byte) []byte {
	w := writer{in: raw}
	w.skip(0)
	if !w.bad && !w.spaced && w.pos == len(raw) {
		return append(b, raw...)
	}
	if out, err := appendCompact(b, raw); err == nil {
		return out
	}
	return append(b, quotedTruncated...)
}

// appendFloat appends f as encoding/json does (ES6 number formatting).
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString appends s as a JSON string, as encoding/json does with HTML escaping off.
func appendString[S []byte | string](b []byte, s S) []byte {
	b = append(b, '"')
	b = appendStringContent(b, s)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendStringContent appends s escaped for a JSON string, without the quotes: control
// characters, '"' and '\\' escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendStringContent[S []byte | string](b []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// appendCompact appends raw without its white space, as encoding/json writes a RawMessage.
func appendCompact(b, raw []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return b, err
	}
	return append(b, out.Bytes()...), nil
}
