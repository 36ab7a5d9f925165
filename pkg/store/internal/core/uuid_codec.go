package core

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// RegisterUUID makes m encode and scan uuid.UUID as the 16 bytes it is.
// pgx otherwise goes through its driver.Valuer: each id, and each element
// of every uuid[] parameter (the report's and the claim's run ids), is
// formatted as text and parsed back, a tenth of the dispatcher's CPU under
// load (docs/BENCHMARKS.md, "uuid parameters as bytes").
func RegisterUUID(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// uuidCodec is pgx's UUIDCodec with plans of its own for uuid.UUID.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return uuidEncodeBinary{}
		case pgtype.TextFormatCode:
			return uuidEncodeText{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return uuidScanBinary{}
		case pgtype.TextFormatCode:
			return uuidScanText{}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type uuidEncodeBinary struct{}

func (uuidEncodeBinary) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

type uuidEncodeText struct{}

func (uuidEncodeText) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(uuid.UUID).String()...), nil
}

type uuidScanBinary struct{}

func (uuidScanBinary) Scan(src []byte, dst any) error {
	if src == nil {
		return nil // as uuid.UUID's Scan: NULL leaves it as it was
	}
	if len(src) != 16 {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}

type uuidScanText struct{}

func (uuidScanText) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	id, err := uuid.ParseBytes(src)
	if err != nil {
		return err
	}
	*dst.(*uuid.UUID) = id
	return nil
}
