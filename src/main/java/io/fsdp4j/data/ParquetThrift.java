package io.fsdp4j.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Thrift's compact protocol, in which Parquet writes its footer and page headers, read into maps of field id to value
 * (Long, Double, Boolean, byte[], List, Map); {@link #pos} is where the next read starts.
 */
final class ParquetThrift {
    private final byte[] b;
    private final Path file;
    int pos;

    ParquetThrift(byte[] b, Path file) {
        this.b = b;
        this.file = file;
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
            default -> throw ParquetRows.corrupt(file, "unknown Thrift type " + type + " in its metadata");
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
