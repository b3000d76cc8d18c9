package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.airlift.compress.snappy.SnappyDecompressor;
import io.airlift.compress.zstd.ZstdDecompressor;
import io.fsdp4j.UserError;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * The rows of a Parquet file (what the Hugging Face Hub serves datasets in) as JSON objects, one row group in memory
 * at a time, read here without Hadoop: the footer's Thrift compact protocol, data pages v1 and v2, PLAIN and
 * dictionary encodings, definition and repetition levels (RLE / bit-packed hybrid), and the codecs UNCOMPRESSED,
 * SNAPPY, ZSTD (aircompressor) and GZIP. Columns: top-level primitives (strings, integers, floating point, booleans)
 * and top-level lists of primitives or of structs of primitives, such as {@code messages: list<struct<role,
 * content>>}. Anything else is a {@link UserError} naming the file and the column.
 */
public final class ParquetRows {
    private static final byte[] MAGIC = "PAR1".getBytes(StandardCharsets.US_ASCII);
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    /** A row and its number (from 1) in the file. */
    public interface RowConsumer {
        void accept(ObjectNode row, long number);
    }

    private final Path file;
    private final FileChannel channel;
    private final List<Node> top = new ArrayList<>();
    private final List<Leaf> leaves = new ArrayList<>();
    private final List<Map<Integer, Object>> rowGroups;

    /** A schema node: its name, repetition (0 required, 1 optional, 2 repeated), physical type or -1, children. */
    private record Node(String name, int repetition, int type, boolean string, List<Node> children) {}

    /**
     * A leaf column: its path from the top, its top-level field, the path index of its repeated node (-1: none),
     * the definition level reached at each node of its path.
     */
    private record Leaf(List<Node> path, int repeated, int[] defAt) {
        int maxDef() {
            return defAt[defAt.length - 1];
        }

        Node node() {
            return path.getLast();
        }

        String dotted() {
            return String.join(".", path.stream().map(Node::name).toList());
        }
    }

    private ParquetRows(Path file, FileChannel channel) throws IOException {
        this.file = file;
        this.channel = channel;
        long size = channel.size();
        if (size < 12 || !Arrays.equals(read(0, 4), MAGIC) || !Arrays.equals(read(size - 4, 4), MAGIC)) {
            throw new UserError("data file " + file + " is not a Parquet file (no PAR1 at its start and end)");
        }
        int footerLength = ByteBuffer.wrap(read(size - 8, 4)).order(ByteOrder.LITTLE_ENDIAN).getInt();
        if (footerLength <= 0 || footerLength > size - 12) {
            throw corrupt("its footer length " + footerLength + " does not fit the file");
        }
        Map<Integer, Object> meta = new Thrift(read(size - 8 - footerLength, footerLength), this).struct();
        List<Map<Integer, Object>> schema = list(meta.get(2));
        int[] at = {1};
        Map<Integer, Object> root = schema.getFirst();
        for (int c = 0; c < integer(root.get(5), 0); c++) {
            top.add(node(schema, at));
        }
        for (Node n : top) {
            addLeaves(new ArrayList<>(List.of(n)));
        }
        rowGroups = list(meta.get(4));
    }

    private Node node(List<Map<Integer, Object>> schema, int[] at) {
        Map<Integer, Object> e = schema.get(at[0]++);
        String name = new String((byte[]) e.get(4), StandardCharsets.UTF_8);
        int children = integer(e.get(5), 0);
        List<Node> kids = new ArrayList<>();
        for (int c = 0; c < children; c++) {
            kids.add(node(schema, at));
        }
        boolean string = integer(e.get(6), -1) == 0 || e.get(10) instanceof Map<?, ?> logical && logical.containsKey(1);
        return new Node(name, integer(e.get(3), 0), e.containsKey(1) ? integer(e.get(1), -1) : -1, string, kids);
    }

    private void addLeaves(List<Node> path) {
        Node last = path.getLast();
        if (last.children().isEmpty()) {
            int[] defAt = new int[path.size()];
            int def = 0, repeated = -1;
            for (int k = 0; k < path.size(); k++) {
                int r = path.get(k).repetition();
                if (r != 0) {
                    def++;
                }
                if (r == 2) {
                    if (repeated >= 0) {
                        throw unsupported(path, "lists of lists");
                    }
                    repeated = k;
                }
                defAt[k] = def;
            }
            if (repeated == 0 || repeated >= 0 && path.size() - repeated > 3
                    || repeated < 0 && path.size() > 1) {
                throw unsupported(path, "nested structs outside a top-level list");
            }
            leaves.add(new Leaf(List.copyOf(path), repeated, defAt));
            return;
        }
        for (Node child : last.children()) {
            path.add(child);
            addLeaves(path);
            path.removeLast();
        }
    }

    private UserError unsupported(List<Node> path, String what) {
        return new UserError("data file " + file + ": column " + String.join(".", path.stream().map(Node::name)
                .toList()) + " is of a shape not read here (" + what + "); give top-level columns, or lists of"
                + " structs such as messages, or convert the file to JSONL");
    }

    /** The names of the top-level columns of {@code file}. */
    public static List<String> columns(Path file) {
        try (FileChannel channel = open(file)) {
            return new ParquetRows(file, channel).top.stream().map(Node::name).toList();
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        }
    }

    /** The format told by the first top-level column that tells one ({@link DatasetFormat#byKey}). */
    static DatasetFormat detect(Path file) {
        for (String column : columns(file)) {
            DatasetFormat f = DatasetFormat.byKey(column);
            if (f != null && f != DatasetFormat.TOKENS) {
                return f;
            }
        }
        throw DatasetFormat.unknown(file);
    }

    /** Hands each row of {@code file} to {@code each}, in order. */
    public static void read(Path file, RowConsumer each) {
        try (FileChannel channel = open(file)) {
            ParquetRows rows = new ParquetRows(file, channel);
            long number = 0;
            for (Map<Integer, Object> group : rows.rowGroups) {
                number = rows.readGroup(group, number, each);
            }
        } catch (IOException e) {
            throw new UserError("cannot read " + file + ": " + e.getMessage());
        } catch (RuntimeException e) {
            if (e instanceof UserError) {
                throw e;
            }
            throw new UserError("data file " + file + " is not a Parquet file read here: " + e, e);
        }
    }

    private static FileChannel open(Path file) throws IOException {
        try {
            return FileChannel.open(file, StandardOpenOption.READ);
        } catch (NoSuchFileException e) {
            throw new UserError("data file " + file + " does not exist");
        }
    }

    /** One column chunk decoded: levels per value slot, and the values that are present. */
    private record Column(int[] rep, int[] def, Object[] values) {}

    private long readGroup(Map<Integer, Object> group, long firstRow, RowConsumer each) throws IOException {
        long rows = ((Number) group.get(3)).longValue();
        List<Map<Integer, Object>> chunks = list(group.get(1));
        if (chunks.size() != leaves.size()) {
            throw corrupt("a row group has " + chunks.size() + " columns, the schema " + leaves.size());
        }
        Column[] columns = new Column[leaves.size()];
        for (int c = 0; c < columns.length; c++) {
            @SuppressWarnings("unchecked")
            Map<Integer, Object> meta = (Map<Integer, Object>) chunks.get(c).get(3);
            columns[c] = column(leaves.get(c), meta);
        }
        // Per leaf, the position of each row's first slot (a row starts where the repetition level is 0).
        int[][] rowStart = new int[leaves.size()][];
        for (int c = 0; c < columns.length; c++) {
            int[] starts = new int[(int) rows + 1];
            int r = 0;
            for (int s = 0; s < columns[c].def().length; s++) {
                if (columns[c].rep() == null || columns[c].rep()[s] == 0) {
                    if (r >= rows) {
                        throw corrupt("column " + leaves.get(c).dotted() + " has more rows than its row group");
                    }
                    starts[r++] = s;
                }
            }
            if (r != rows) {
                throw corrupt("column " + leaves.get(c).dotted() + " has " + r + " rows, its row group " + rows);
            }
            starts[(int) rows] = columns[c].def().length;
            rowStart[c] = starts;
        }
        int[] valueAt = new int[leaves.size()]; // next present value, per leaf
        for (int row = 0; row < rows; row++) {
            ObjectNode out = NODES.objectNode();
            int c = 0;
            while (c < leaves.size()) {
                Leaf leaf = leaves.get(c);
                Node field = leaf.path().getFirst();
                int end = c;
                while (end < leaves.size() && leaves.get(end).path().getFirst() == field) {
                    end++;
                }
                out.set(field.name(), field(leaf, c, end, row, columns, rowStart, valueAt));
                c = end;
            }
            each.accept(out, firstRow + row + 1);
        }
        return firstRow + rows;
    }

    /** The value of top-level field of leaves {@code from..to-1} in {@code row}. */
    private JsonNode field(Leaf first, int from, int to, int row, Column[] columns, int[][] rowStart, int[] valueAt) {
        if (first.repeated() < 0) { // a primitive column
            int s = rowStart[from][row];
            return value(first, columns[from], s, valueAt, from);
        }
        int r = first.repeated();
        Column lead = columns[from];
        int s0 = rowStart[from][row], s1 = rowStart[from][row + 1];
        int def = lead.def()[s0];
        JsonNode result;
        if (r > 0 && def < first.defAt()[r - 1]) {
            result = NullNode.getInstance();
        } else if (def < first.defAt()[r]) {
            result = NODES.arrayNode();
        } else {
            ArrayNode list = NODES.arrayNode();
            boolean structs = first.path().size() - r == 3;
            for (int e = 0; e < s1 - s0; e++) {
                if (structs && lead.def()[s0 + e] < first.defAt()[r + 1]) {
                    list.add(NullNode.getInstance());
                    continue;
                }
                if (!structs) {
                    list.add(value(first, lead, s0 + e, valueAt, from));
                    continue;
                }
                ObjectNode element = NODES.objectNode();
                for (int c = from; c < to; c++) {
                    Leaf leaf = leaves.get(c);
                    if (rowStart[c][row + 1] - rowStart[c][row] != s1 - s0) {
                        throw corrupt("the columns of " + first.path().getFirst().name() + " differ in length");
                    }
                    element.set(leaf.node().name(), value(leaf, columns[c], rowStart[c][row] + e, valueAt, c));
                }
                list.add(element);
            }
            result = list;
        }
        // levels of the other leaves of a list that is null or empty carry no values: nothing to skip
        return result;
    }

    private JsonNode value(Leaf leaf, Column column, int slot, int[] valueAt, int c) {
        if (column.def()[slot] < leaf.maxDef()) {
            return NullNode.getInstance();
        }
        Object v = column.values()[valueAt[c]++];
        return switch (v) {
            case byte[] bytes -> NODES.textNode(new String(bytes, StandardCharsets.UTF_8)); // strings, as datasets hold
            case Long l -> NODES.numberNode(l);
            case Integer i -> NODES.numberNode(i);
            case Double d -> NODES.numberNode(d);
            case Float f -> NODES.numberNode(f);
            case Boolean b -> NODES.booleanNode(b);
            default -> throw new IllegalStateException(String.valueOf(v));
        };
    }

    // ---- column chunks and pages ----

    private Column column(Leaf leaf, Map<Integer, Object> meta) throws IOException {
        int type = integer(meta.get(1), -1);
        int codec = integer(meta.get(4), 0);
        long count = ((Number) meta.get(5)).longValue();
        long size = ((Number) meta.get(7)).longValue();
        long start = ((Number) meta.get(9)).longValue();
        if (meta.get(11) instanceof Number dictionary && dictionary.longValue() > 0) {
            start = Math.min(start, dictionary.longValue());
        }
        byte[] chunk = read(start, Math.toIntExact(size));
        Thrift in = new Thrift(chunk, this);
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

    private static int present(int[] def, int from, int n, Leaf leaf) {
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

    private void values(Leaf leaf, int type, int encoding, ByteBuffer page, int n, Object[] dictionary,
                        List<Object> out) {
        switch (encoding) {
            case 0 -> out.addAll(Arrays.asList(plain(type, page, n, leaf)));
            case 2, 8 -> {
                if (dictionary == null) {
                    throw corrupt("column " + leaf.dotted() + " uses a dictionary it does not have");
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

    private Object[] plain(int type, ByteBuffer in, int n, Leaf leaf) {
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
            throw corrupt("a page does not decompress: " + e.getMessage());
        }
    }

    private byte[] read(long position, int length) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate(length);
        while (buffer.hasRemaining()) {
            if (channel.read(buffer, position + buffer.position()) < 0) {
                throw corrupt("it ends before byte " + (position + length));
            }
        }
        return buffer.array();
    }

    private UserError corrupt(String what) {
        return new UserError("data file " + file + " is not a valid Parquet file: " + what);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<Integer, Object>> list(Object o) {
        return o == null ? List.of() : (List<Map<Integer, Object>>) o;
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

    /** Thrift's compact protocol, read into maps of field id to value (Long, Double, Boolean, byte[], List, Map). */
    private static final class Thrift {
        private final byte[] b;
        private final ParquetRows owner;
        int pos;

        Thrift(byte[] b, ParquetRows owner) {
            this.b = b;
            this.owner = owner;
        }

        Map<Integer, Object> struct() {
            Map<Integer, Object> fields = new LinkedHashMap<>();
            int id = 0;
            while (true) {
                int header = b[pos++] & 0xff;
                int type = header & 0x0f;
                if (type == 0) {
                    return fields;
                }
                int delta = header >>> 4;
                id = delta == 0 ? (int) zigzag() : id + delta;
                fields.put(id, value(type));
            }
        }

        private Object value(int type) {
            return switch (type) {
                case 1 -> Boolean.TRUE;
                case 2 -> Boolean.FALSE;
                case 3 -> (long) b[pos++];
                case 4, 5, 6 -> zigzag();
                case 7 -> {
                    double d = ByteBuffer.wrap(b, pos, 8).order(ByteOrder.LITTLE_ENDIAN).getDouble();
                    pos += 8;
                    yield d;
                }
                case 8 -> {
                    int n = (int) varint();
                    byte[] bytes = Arrays.copyOfRange(b, pos, pos + n);
                    pos += n;
                    yield bytes;
                }
                case 9, 10 -> {
                    int header = b[pos++] & 0xff;
                    int n = header >>> 4 == 15 ? (int) varint() : header >>> 4;
                    int elementType = header & 0x0f;
                    List<Object> items = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        items.add(elementType == 1 || elementType == 2 ? (Object) (b[pos++] == 1) : value(elementType));
                    }
                    yield items;
                }
                case 11 -> {
                    int n = (int) varint();
                    Map<Object, Object> map = new LinkedHashMap<>();
                    if (n > 0) {
                        int types = b[pos++] & 0xff;
                        for (int i = 0; i < n; i++) {
                            map.put(value(types >>> 4), value(types & 0x0f));
                        }
                    }
                    yield map;
                }
                case 12 -> struct();
                default -> throw owner.corrupt("unknown Thrift type " + type + " in its metadata");
            };
        }

        private long varint() {
            long result = 0;
            for (int shift = 0; ; shift += 7) {
                int x = b[pos++] & 0xff;
                result |= (long) (x & 0x7f) << shift;
                if ((x & 0x80) == 0) {
                    return result;
                }
            }
        }

        private long zigzag() {
            long v = varint();
            return (v >>> 1) ^ -(v & 1);
        }
    }
}
