package daggers.spark;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;

/**
 * DistinctCount as a Spark Aggregator whose buffer is one byte array: the distinct values' bytes, each
 * after its length (a varint), sorted by (length, then bytes as unsigned numbers). Adding a value and
 * merging two buffers are one linear pass of byte copies, and the state store keeps the buffer as it is:
 * Spark's collect_set instead rebuilt a hash set of the whole window's values for every key a
 * micro-batch touched (see job/jvm/__init__.py).
 *
 * Compiled by Janino (shipped with Spark), which reads Java without generics: the Aggregator's
 * methods are written with their erased types.
 */
public class DistinctCount extends Aggregator {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];

    public Object zero() { return EMPTY; }

    public Object reduce(Object buffer, Object value) {
        if (value == null) return buffer;
        byte[] one = (byte[]) value;
        byte[] entry = new byte[varintSize(one.length) + one.length];
        int at = putVarint(entry, 0, one.length);
        System.arraycopy(one, 0, entry, at, one.length);
        return mergeBlobs((byte[]) buffer, entry);
    }

    public Object merge(Object a, Object b) { return mergeBlobs((byte[]) a, (byte[]) b); }

    public Object finish(Object buffer) { return Integer.valueOf(count((byte[]) buffer)); }

    /** The number of values in a buffer. */
    static int count(byte[] blob) {
        int n = 0;
        int pos = 0;
        while (pos < blob.length) {
            int len = 0;
            int shift = 0;
            int b;
            do {
                b = blob[pos++] & 0xff;
                len |= (b & 0x7f) << shift;
                shift += 7;
            } while ((b & 0x80) != 0);
            pos += len;
            n++;
        }
        return n;
    }

    public Encoder bufferEncoder() { return Encoders.BINARY(); }

    public Encoder outputEncoder() { return Encoders.INT(); }

    static int varintSize(int v) {
        int n = 1;
        while ((v & ~0x7f) != 0) { v >>>= 7; n++; }
        return n;
    }

    static int putVarint(byte[] out, int pos, int v) {
        while ((v & ~0x7f) != 0) { out[pos++] = (byte) ((v & 0x7f) | 0x80); v >>>= 7; }
        out[pos++] = (byte) v;
        return pos;
    }

    /**
     * Both sorted and without repeats: return their union, sorted and without repeats. The smaller one's
     * entries are looked up in the larger one by one forward scan, and the runs of the larger one between
     * them are copied whole; when the larger one holds them all, it is returned as it is.
     */
    static byte[] mergeBlobs(byte[] a, byte[] b) {
        if (b.length == 0) return a;
        if (a.length == 0) return b;
        if (b.length > a.length) {
            byte[] t = a;
            a = b;
            b = t;
        }
        byte[] out = null;
        int o = 0;
        int copied = 0;  // a[0, copied) is in out
        int scan = 0;  // the next entry of a to compare
        int j = 0;
        int[] ea = new int[2];
        int[] eb = new int[2];
        while (j < b.length) {
            int nextJ = readEntry(b, j, eb);
            int c = 1;
            while (scan < a.length) {
                int next = readEntry(a, scan, ea);
                c = compare(a, ea[0], ea[1], b, eb[0], eb[1]);
                if (c >= 0) break;
                scan = next;
            }
            if (scan < a.length && c == 0) {  // already in a
                j = nextJ;
                continue;
            }
            if (out == null) out = new byte[a.length + b.length];
            System.arraycopy(a, copied, out, o, scan - copied);
            o += scan - copied;
            copied = scan;
            System.arraycopy(b, j, out, o, nextJ - j);  // an entry's bytes are the same in any blob
            o += nextJ - j;
            j = nextJ;
        }
        if (out == null) return a;
        System.arraycopy(a, copied, out, o, a.length - copied);
        o += a.length - copied;
        if (o == out.length) return out;
        byte[] exact = new byte[o];
        System.arraycopy(out, 0, exact, 0, o);
        return exact;
    }

    /** Read the entry at pos: e[0] = start of its bytes, e[1] = their length; return the next entry's pos. */
    static int readEntry(byte[] blob, int pos, int[] e) {
        int len = 0;
        int shift = 0;
        int b;
        do {
            b = blob[pos++] & 0xff;
            len |= (b & 0x7f) << shift;
            shift += 7;
        } while ((b & 0x80) != 0);
        e[0] = pos;
        e[1] = len;
        return pos + len;
    }

    static int compare(byte[] a, int sa, int la, byte[] b, int sb, int lb) {
        if (la != lb) return la < lb ? -1 : 1;
        for (int k = 0; k < la; k++) {
            int x = a[sa + k] & 0xff;
            int y = b[sb + k] & 0xff;
            if (x != y) return x < y ? -1 : 1;
        }
        return 0;
    }
}
