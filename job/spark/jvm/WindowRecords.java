package daggers.spark;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;

/**
 * The records of a micro-batch per window, for counting the records Spark drops as late: each input is
 * (a window's end in microseconds, the records a row stands for: 1, or a group's count where the source
 * aggregated first); the buffer is (end, records) pairs of longs in a byte array, big-endian (a batch
 * touches few windows, so a linear scan finds one); the result is "end:records" pairs joined by commas.
 * An input whose end is NULL (a record without an event time) is left out, as Spark's window leaves it out.
 *
 * Compiled by Janino, which reads Java without generics: the methods are written with their erased types,
 * and the input is the Scala tuple that Encoders.tuple(LONG, LONG) makes.
 */
public class WindowRecords extends Aggregator {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];

    public Object zero() { return EMPTY; }

    public Object reduce(Object buffer, Object value) {
        if (value == null) return buffer;
        scala.Tuple2 pair = (scala.Tuple2) value;
        if (pair._1() == null || pair._2() == null) return buffer;
        return add((byte[]) buffer, ((Long) pair._1()).longValue(), ((Long) pair._2()).longValue());
    }

    public Object merge(Object a, Object b) {
        byte[] out = (byte[]) a;
        byte[] other = (byte[]) b;
        for (int at = 0; at < other.length; at += 16) {
            out = add(out, get(other, at), get(other, at + 8));
        }
        return out;
    }

    public Object finish(Object buffer) {
        byte[] blob = (byte[]) buffer;
        StringBuilder text = new StringBuilder();
        for (int at = 0; at < blob.length; at += 16) {
            if (at > 0) text.append(',');
            text.append(get(blob, at)).append(':').append(get(blob, at + 8));
        }
        return text.toString();
    }

    public Encoder bufferEncoder() { return Encoders.BINARY(); }

    public Encoder outputEncoder() { return Encoders.STRING(); }

    /** The buffer with ``records`` added to window ``end``'s: in place when the window is there already. */
    static byte[] add(byte[] blob, long end, long records) {
        for (int at = 0; at < blob.length; at += 16) {
            if (get(blob, at) == end) {
                put(blob, at + 8, get(blob, at + 8) + records);
                return blob;
            }
        }
        byte[] out = new byte[blob.length + 16];
        System.arraycopy(blob, 0, out, 0, blob.length);
        put(out, blob.length, end);
        put(out, blob.length + 8, records);
        return out;
    }

    static long get(byte[] blob, int at) {
        long v = 0;
        for (int i = 0; i < 8; i++) v = (v << 8) | (blob[at + i] & 0xffL);
        return v;
    }

    static void put(byte[] blob, int at, long v) {
        for (int i = 7; i >= 0; i--) {
            blob[at + i] = (byte) v;
            v >>>= 8;
        }
    }
}
