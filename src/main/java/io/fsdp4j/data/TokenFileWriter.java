package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Appends documents to the binary files of a token-files directory: {@code tokens.bin} and {@code labels.bin}
 * (int32 little-endian, one per token) and {@code documents.bin} (int64 little-endian offsets of each document's
 * first token, then the total). Each file is forced to disk on {@link #close}.
 */
final class TokenFileWriter implements AutoCloseable {
    private final Channel tokens, labels, documents;
    private long offset;
    private int count;
    private long lossTokens;
    private boolean closed;

    TokenFileWriter(Path dir) throws IOException {
        tokens = new Channel(dir.resolve(TokenFiles.TOKENS));
        labels = new Channel(dir.resolve(TokenFiles.LABELS));
        documents = new Channel(dir.resolve(TokenFiles.DOCUMENTS));
    }

    /** Appends one document; returns its index. */
    int append(Sequence document) throws IOException {
        documents.putLong(offset);
        for (int i = 0; i < document.length(); i++) {
            tokens.putInt(document.ids()[i]);
            labels.putInt(document.labels()[i]);
            if (document.labels()[i] != TokenBatch.IGNORE) {
                lossTokens++;
            }
        }
        offset += document.length();
        return count++;
    }

    int documents() {
        return count;
    }

    long tokens() {
        return offset;
    }

    long lossTokens() {
        return lossTokens;
    }

    /** Writes the end offset and closes the files, forced to disk; again, does nothing. */
    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        try (tokens; labels; documents) {
            documents.putLong(offset);
        }
    }

    /** A file written through a little-endian buffer. */
    private static final class Channel implements AutoCloseable {
        private final FileChannel channel;
        private final ByteBuffer buffer = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.LITTLE_ENDIAN);

        Channel(Path file) throws IOException {
            channel = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        }

        void putInt(int v) throws IOException {
            if (buffer.remaining() < Integer.BYTES) {
                flush();
            }
            buffer.putInt(v);
        }

        void putLong(long v) throws IOException {
            if (buffer.remaining() < Long.BYTES) {
                flush();
            }
            buffer.putLong(v);
        }

        private void flush() throws IOException {
            buffer.flip();
            while (buffer.hasRemaining()) {
                channel.write(buffer);
            }
            buffer.clear();
        }

        @Override
        public void close() throws IOException {
            try (channel) {
                flush();
                channel.force(true);
            }
        }
    }
}
