package daggers.spark;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;

/**
 * DistinctCount over buffers made already: each input is a DistinctCount buffer (the distinct values'
 * bytes, each after its length, sorted) that the Kafka source built from one key's values in one task, and
 * is merged into the key's buffer as DistinctCount merges two buffers. The count is DistinctCount's.
 */
public class DistinctCountMerge extends Aggregator {
    private static final long serialVersionUID = 1L;
    private static final byte[] EMPTY = new byte[0];

    public Object zero() { return EMPTY; }

    public Object reduce(Object buffer, Object value) {
        if (value == null) return buffer;
        return DistinctCount.mergeBlobs((byte[]) buffer, (byte[]) value);
    }

    public Object merge(Object a, Object b) { return DistinctCount.mergeBlobs((byte[]) a, (byte[]) b); }

    public Object finish(Object buffer) { return Integer.valueOf(DistinctCount.count((byte[]) buffer)); }

    public Encoder bufferEncoder() { return Encoders.BINARY(); }

    public Encoder outputEncoder() { return Encoders.INT(); }
}
