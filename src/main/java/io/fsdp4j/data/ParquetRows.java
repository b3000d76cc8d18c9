package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import io.fsdp4j.data.ParquetPages.Column;
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
import java.util.List;
import java.util.Map;

/**
 * The rows of a Parquet file (what the Hugging Face Hub serves datasets in) as JSON objects, one row group in memory
 * at a time, read here without Hadoop: the footer ({@link ParquetThrift}), the schema's leaf columns and their
 * levels, and the rows put together from the column chunks that {@link ParquetPages} decodes. Columns: top-level
 * primitives (strings, integers, floating point, booleans) and top-level lists of primitives or of structs of
 * primitives, such as {@code messages: list<struct<role, content>>}. Anything else is a {@link UserError} naming the
 * file and the column.
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
    record Leaf(List<Node> path, int repeated, int[] defAt) {
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
        Map<Integer, Object> meta = new ParquetThrift(read(size - 8 - footerLength, footerLength), file).struct();
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

    /** The column chunk of {@code leaf} that {@code meta} (its ColumnMetaData) describes, decoded. */
    private Column column(Leaf leaf, Map<Integer, Object> meta) throws IOException {
        long size = ((Number) meta.get(7)).longValue();
        long start = ((Number) meta.get(9)).longValue();
        if (meta.get(11) instanceof Number dictionary && dictionary.longValue() > 0) {
            start = Math.min(start, dictionary.longValue());
        }
        return ParquetPages.decode(file, leaf, meta, read(start, Math.toIntExact(size)));
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
        return corrupt(file, what);
    }

    /** The error of a file that is not valid Parquet: {@code what} is wrong with it. */
    static UserError corrupt(Path file, String what) {
        return new UserError("data file " + file + " is not a valid Parquet file: " + what);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<Integer, Object>> list(Object o) {
        return o == null ? List.of() : (List<Map<Integer, Object>>) o;
    }

    private static int integer(Object o, int fallback) {
        return o instanceof Number n ? n.intValue() : fallback;
    }
}
