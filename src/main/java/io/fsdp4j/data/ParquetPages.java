package io.fsdp4j.data;

import io.airlift.compress.snappy.SnappyDecompressor;
import io.airlift.compress.zstd.ZstdDecompressor;
import io.fsdp4j.UserError;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * The pages of one Parquet column chunk decoded into levels and values: data pages v1 and v2 and their dictionary
 * page, definition and repetition levels (RLE / bit-packed hybrid), PLAIN, dictionary and RLE-boolean encodings, and
 * the codecs UNCOMPRESSED, SNAPPY, ZSTD (aircompressor) and GZIP. {@link ParquetRows} puts the values into rows.
 */
final class ParquetPages {
    /** One column chunk decoded: levels per value slot, and the values that are present. */
    record Column(int[] rep, int[] def, Object[] values) {}

    private final Path file;

    private ParquetPages(Path file) {
        this.file = file;
    }

    /** The column chunk of {@code leaf} that {@code meta} (its ColumnMetaData) describes, from its bytes {@code chunk}. */
    static Column decode(Path file, ParquetRows.Leaf leaf, Map<Integer, Object> meta, byte[] chunk) {
        return new ParquetPages(file).column(leaf, meta, chunk);
    }

    private Column column(ParquetRows.Leaf leaf, Map<Integer, Object> meta, byte[] chunk) {
        int type = integer(meta.get(1), -1);
        int codec = integer(meta.get(4), 0);
        long count = ((Number) meta.get(5)).longValue();
        ParquetThrift in = new ParquetThrift(chunk, file);
        int[] rep = leaf.repeated() >= 0 ? new int[(int) count] : null;
        int[] def = new int[(int) count];
        List<Object> values = new ArrayList<>();
        Object[] dictionary = null;
        int slots = 0;
        while (slots < count) {
            Map<Integer, Object> header = in.struct();
            int pageType = integer(header.get(1), -1);
            int uncompressed = integer(header.get(2), 0);
            int compressed = integer(header.get(3), 0);
            int at = in.pos;
            in.pos += compressed;
            switch (pageType) {
                case 2 -> { // dictionary
                    @SuppressWarnings("unchecked")
                    Map<Integer, Object> d = (Map<Integer, Object>) header.get(7);
                    byte[] page = decompress(codec, chunk, at, compressed, uncompressed);
                    int n = integer(d.get(1), 0);
                    dictionary = plain(type, ByteBuffer.wrap(page).order(ByteOrder.LITTLE_ENDIAN), n, leaf);
                }
                case 0 -> { // data page v1
                    @SuppressWarnings("unchecked")
                    Map<Integer, Object> d = (Map<Integer, Object>) header.get(5);
                    int n = integer(d.get(1), 0);
                    ByteBuffer page = ByteBuffer.wrap(decompress(codec, chunk, at, compressed, uncompressed))
                            .order(ByteOrder.LITTLE_ENDIAN);
                    if (rep != null) {
                        levels(page, page.getInt(), bitWidth(1), rep, slots, n);
                    }
                    if (leaf.maxDef() > 0) {
                        levels(page, page.getInt(), bitWidth(leaf.maxDef()), def, slots, n);
                    }
                    values(leaf, type, integer(d.get(2), 0), page, present(def, slots, n, leaf), dictionary, values);
                    slots += n;
                }
                case 3 -> { // data page v2: levels uncompressed first
                    @SuppressWarnings("unchecked")
                    Map<Integer, Object> d = (Map<Integer, Object>) header.get(8);
                    int n = integer(d.get(1), 0);
                    int defLength = integer(d.get(5), 0), repLength = integer(d.get(6), 0);
                    boolean isCompressed = !(d.get(7) instanceof Boolean b) || b;
                    ByteBuffer levels = ByteBuffer.wrap(chunk, at, repLength + defLength).order(ByteOrder.LITTLE_ENDIAN);
                    if (rep != null) {
                        levels(levels, repLength, 1, rep, slots, n);
                    }
                    if (leaf.maxDef() > 0) {
                        levels(levels, defLength, bitWidth(leaf.maxDef()), def, slots, n);
                    }
                    int offset = at + repLength + defLength, length = compressed - repLength - defLength;
                    byte[] data = isCompressed
                            ? decompress(codec, chunk, offset, length, uncompressed - repLength - defLength)
                            : Arrays.copyOfRange(chunk, offset, offset + length);
                    values(leaf, type, integer(d.get(4), 0), ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN),
                            present(def, slots, n, leaf), dictionary, values);
                    slots += n;
                }
                default -> { } // index pages and the like: skipped
            }
        }
        return new Column(rep, def, values.toArray());
    }

    private static int present(int[] def, int from, int n, ParquetRows.Leaf leaf) {
        int p = 0;
        for (int s = from; s < from + n; s++) {
            if (def[s] == leaf.maxDef()) {
                p++;
            }
        }
        return p;
    }

    private static int bitWidth(int max) {
        return 32 - Integer.numberOfLeadingZeros(max);
    }

    /** {@code n} levels from the RLE / bit-packed hybrid of {@code length} bytes at the buffer's position. */
    private static void levels(ByteBuffer in, int length, int width, int[] out, int from, int n) {
        int end = in.position() + length;
        hybrid(in, end, width, out, from, n);
        in.position(end);
    }

    private static void hybrid(ByteBuffer in, int end, int width, int[] out, int from, int n) {
        int i = from;
        while (i < from + n && in.position() < end) {
            long header = varint(in);
            if ((header & 1) == 0) {
                int run = (int) (header >>> 1);
                int value = 0;
                for (int b = 0; b < (width + 7) / 8; b++) {
                    value |= (in.get() & 0xff) << (8 * b);
                }
                for (int k = 0; k < run && i < from + n; k++) {
                    out[i++] = value;
                }
            } else {
                int values = (int) (header >>> 1) * 8;
                long buffer = 0;
                int bits = 0;
                int bytes = (int) (header >>> 1) * width;
                int read = 0;
                for (int k = 0; k < values; k++) {
                    while (bits < width) {
                        buffer |= (long) (read < bytes ? in.get() & 0xff : 0) << bits;
                        read++;
                        bits += 8;
                    }
                    int v = (int) (buffer & ((1L << width) - 1));
                    buffer >>>= width;
                    bits -= width;
                    if (i < from + n) {
                        out[i++] = v;
                    }
                }
                while (read < bytes) {
                    in.get();
                    read++;
                }
            }
        }
        while (i < from + n) {
            out[i++] = 0; // width 0: every level 0
        }
    }

    private void values(ParquetRows.Leaf leaf, int type, int encoding, ByteBuffer page, int n, Object[] dictionary,
                        List<Object> out) {
        switch (encoding) {
            case 0 -> out.addAll(Arrays.asList(plain(type, page, n, leaf)));
            case 2, 8 -> {
                if (dictionary == null) {
                    throw ParquetRows.corrupt(file, "column " + leaf.dotted() + " uses a dictionary it does not have");
                }
                int width = page.get() & 0xff;
                int[] index = new int[n];
                hybrid(page, page.limit(), width, index, 0, n);
                for (int k : index) {
                    out.add(dictionary[k]);
                }
            }
            case 3 -> { // RLE booleans: a 4-byte length, then the hybrid of width 1
                int length = page.getInt();
                int[] bits = new int[n];
                hybrid(page, page.position() + length, 1, bits, 0, n);
                for (int b : bits) {
                    out.add(b == 1);
                }
            }
            default -> throw new UserError("data file " + file + ": column " + leaf.dotted() + " uses Parquet"
                    + " encoding " + encoding + ", not read here; write it with PLAIN or dictionary encoding");
        }
    }

    private Object[] plain(int type, ByteBuffer in, int n, ParquetRows.Leaf leaf) {
        Object[] out = new Object[n];
        switch (type) {
            case 0 -> { // BOOLEAN, bit-packed from the least significant bit
                int start = in.position();
                for (int k = 0; k < n; k++) {
                    out[k] = ((in.get(start + k / 8) >> (k % 8)) & 1) == 1;
                }
                in.position(start + (n + 7) / 8);
            }
            case 1 -> Arrays.setAll(out, k -> in.getInt());
            case 2 -> Arrays.setAll(out, k -> in.getLong());
            case 4 -> Arrays.setAll(out, k -> in.getFloat());
            case 5 -> Arrays.setAll(out, k -> in.getDouble());
            case 6 -> Arrays.setAll(out, k -> {
                byte[] b = new byte[in.getInt()];
                in.get(b);
                return b;
            });
            default -> throw new UserError("data file " + file + ": column " + leaf.dotted() + " has Parquet type "
                    + type + ", not read here (strings, integers, floating point and booleans are)");
        }
        return out;
    }

    private byte[] decompress(int codec, byte[] in, int offset, int length, int uncompressed) {
        try {
            return switch (codec) {
                case 0 -> Arrays.copyOfRange(in, offset, offset + length);
                case 1 -> {
                    byte[] out = new byte[uncompressed];
                    int n = new SnappyDecompressor().decompress(in, offset, length, out, 0, out.length);
                    yield n == out.length ? out : Arrays.copyOf(out, n);
                }
                case 6 -> {
                    byte[] out = new byte[uncompressed];
                    int n = new ZstdDecompressor().decompress(in, offset, length, out, 0, out.length);
                    yield n == out.length ? out : Arrays.copyOf(out, n);
                }
                case 2 -> new GZIPInputStream(new ByteArrayInputStream(in, offset, length)).readAllBytes();
                default -> throw new UserError("data file " + file + " is compressed with Parquet codec " + codec
                        + ", not read here (uncompressed, snappy, zstd and gzip are)");
            };
        } catch (IOException e) {
            throw ParquetRows.corrupt(file, "a page does not decompress: " + e.getMessage());
        }
    }

    private static int integer(Object o, int fallback) {
        return o instanceof Number n ? n.intValue() : fallback;
    }

    private static long varint(ByteBuffer in) {
        long result = 0;
        for (int shift = 0; ; shift += 7) {
            int b = in.get() & 0xff;
            result |= (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                return result;
            }
        }
    }

}
