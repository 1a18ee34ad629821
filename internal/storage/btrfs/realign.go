package btrfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// A btrfs send stream carries a file's bytes in write commands of up to
// 48 KiB each, cut from the start of each of the file's extents. Two
// copies of one file whose extents fall differently (the host flushed
// one in two goes) give streams whose command headers sit at different
// places among the same bytes, so no content-defined chunk of one equals
// a chunk of the other and the chunk store keeps both whole. realign
// rewrites a stream so that its writes are cut at fixed file offsets,
// multiples of 48 KiB, whatever the extents: the same file then makes
// the same bytes in every stream. It joins only writes that follow one
// another, to one path, at contiguous offsets, with nothing between them;
// every other command passes unchanged. `btrfs receive` takes either.

// The send stream's framing (linux/fs/btrfs/send.h, version 1).
const (
	sendMagic      = "btrfs-stream\x00"
	sendHeaderSize = len(sendMagic) + 4
	cmdHeaderSize  = 10 // length u32, command u16, crc32c u32
	attrHeaderSize = 4  // type u16, length u16

	cmdWrite   = 15
	attrPath   = 15
	attrOffset = 18
	attrData   = 19

	// writeBlock is how much file data a write command carries, and the
	// file offsets writes are cut at: the kernel's own read size.
	writeBlock = 48 << 10
	// maxCommand bounds one command of a version 1 stream (64 KiB); a
	// larger length is a damaged stream.
	maxCommand = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sendCRC is the checksum btrfs puts in a command's header: CRC-32C of
// the header (checksum zeroed) and the body, seeded with 0 and not
// inverted at either end (the kernel's crc32c(0, ...)).
func sendCRC(header, body []byte) uint32 {
	c := crc32.Update(^uint32(0), castagnoli, header)
	return ^crc32.Update(c, castagnoli, body)
}

// realign copies the send stream src to dst with its writes re-cut as
// said above. A stream of another version passes whole.
func realign(dst io.Writer, src io.Reader) error {
	r := bufio.NewReaderSize(src, 256<<10)
	w := bufio.NewWriterSize(dst, 256<<10)
	head := make([]byte, sendHeaderSize)
	if _, err := io.ReadFull(r, head); err != nil {
		return fmt.Errorf("reading the send stream's header: %w", err)
	}
	if string(head[:len(sendMagic)]) != sendMagic {
		return errors.New("not a btrfs send stream: its header lacks the magic")
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(head[len(sendMagic):]) != 1 {
		if _, err := io.Copy(w, r); err != nil {
			return err
		}
		return w.Flush()
	}
	a := &aligner{w: w}
	if err := a.copyCommands(r); err != nil {
		return err
	}
	if err := a.flush(true); err != nil {
		return err
	}
	return w.Flush()
}

// aligner holds the file data of the writes joined so far, not yet sent.
type aligner struct {
	w    io.Writer
	path []byte
	off  uint64 // the file offset of data[0]
	data []byte
	out  []byte // the command being written
}

// copyCommands reads commands from r until its end.
func (a *aligner) copyCommands(r io.Reader) error {
	hdr := make([]byte, cmdHeaderSize)
	var body []byte
	for n := 0; ; n++ {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading command %d of the send stream: %w", n, err)
		}
		size := binary.LittleEndian.Uint32(hdr)
		if size > maxCommand {
			return fmt.Errorf("command %d of the send stream claims %d bytes, more than a version 1 stream allows", n, size)
		}
		if cap(body) < int(size) {
			body = make([]byte, size)
		}
		body = body[:size]
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("reading command %d of the send stream: %w", n, err)
		}
		if binary.LittleEndian.Uint16(hdr[4:]) == cmdWrite {
			if path, off, data, ok := parseWrite(hdr, body); ok {
				if err := a.add(path, off, data); err != nil {
					return err
				}
				continue
			}
		}
		if err := a.flush(true); err != nil {
			return err
		}
		if _, err := a.w.Write(hdr); err != nil {
			return err
		}
		if _, err := a.w.Write(body); err != nil {
			return err
		}
	}
}

// parseWrite reads a write command the kernel's way, path, offset and
// data in that order, and only when its checksum holds: anything else
// passes as it came.
func parseWrite(hdr, body []byte) (path []byte, off uint64, data []byte, ok bool) {
	zeroed := append([]byte(nil), hdr...)
	binary.LittleEndian.PutUint32(zeroed[6:], 0)
	if sendCRC(zeroed, body) != binary.LittleEndian.Uint32(hdr[6:]) {
		return nil, 0, nil, false
	}
	var attrs [3][]byte
	for i, want := range []uint16{attrPath, attrOffset, attrData} {
		if len(body) < attrHeaderSize || binary.LittleEndian.Uint16(body) != want {
			return nil, 0, nil, false
		}
		n := int(binary.LittleEndian.Uint16(body[2:]))
		if len(body) < attrHeaderSize+n {
			return nil, 0, nil, false
		}
		attrs[i], body = body[attrHeaderSize:attrHeaderSize+n], body[attrHeaderSize+n:]
	}
	if len(body) != 0 || len(attrs[1]) != 8 {
		return nil, 0, nil, false
	}
	return attrs[0], binary.LittleEndian.Uint64(attrs[1]), attrs[2], true
}

// add joins a write to those held, or sends those and holds it alone
// when it does not follow them; then sends every whole block held.
func (a *aligner) add(path []byte, off uint64, data []byte) error {
	if len(a.data) > 0 && (!bytes.Equal(path, a.path) || off != a.off+uint64(len(a.data))) {
		if err := a.flush(true); err != nil {
			return err
		}
	}
	if len(a.data) == 0 {
		a.path = append(a.path[:0], path...)
		a.off = off
	}
	a.data = append(a.data, data...)
	return a.flush(false)
}

// flush sends the data held in writes that end at multiples of
// writeBlock; all of it when all, the rest of it stays held otherwise.
func (a *aligner) flush(all bool) error {
	sent := 0
	for sent < len(a.data) {
		n := int(writeBlock - a.off%writeBlock)
		if n > len(a.data)-sent {
			if !all {
				break
			}
			n = len(a.data) - sent
		}
		if err := a.write(a.data[sent : sent+n]); err != nil {
			return err
		}
		a.off += uint64(n)
		sent += n
	}
	a.data = a.data[:copy(a.data, a.data[sent:])]
	return nil
}

// write sends one write command of data at a.off to a.path.
func (a *aligner) write(data []byte) error {
	size := 3*attrHeaderSize + len(a.path) + 8 + len(data)
	o := append(a.out[:0], make([]byte, cmdHeaderSize)...)
	o = binary.LittleEndian.AppendUint16(o, attrPath)
	o = binary.LittleEndian.AppendUint16(o, uint16(len(a.path)))
	o = append(o, a.path...)
	o = binary.LittleEndian.AppendUint16(o, attrOffset)
	o = binary.LittleEndian.AppendUint16(o, 8)
	o = binary.LittleEndian.AppendUint64(o, a.off)
	o = binary.LittleEndian.AppendUint16(o, attrData)
	o = binary.LittleEndian.AppendUint16(o, uint16(len(data)))
	o = append(o, data...)
	binary.LittleEndian.PutUint32(o, uint32(size))
	binary.LittleEndian.PutUint16(o[4:], cmdWrite)
	binary.LittleEndian.PutUint32(o[6:], sendCRC(o[:cmdHeaderSize], o[cmdHeaderSize:]))
	a.out = o
	_, err := a.w.Write(o)
	return err
}
