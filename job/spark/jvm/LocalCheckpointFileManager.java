package daggers.spark;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint file manager (offsets, commits, metadata, state store files), which
 * writes a checkpoint on the local disk through {@link NioLocalFileSystem}: the same files, checksum
 * files and renames as Hadoop's LocalFileSystem, with no process started per file. A checkpoint anywhere
 * else (HDFS, an object store) goes through the file system Hadoop gives for its path, as before.
 */
public class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {
    private final FileSystem local;

    public LocalCheckpointFileManager(Path path, Configuration conf) throws IOException {
        super(path, conf);
        FileSystem given = super.fs();
        if (given instanceof LocalFileSystem) {
            LocalFileSystem checked = new LocalFileSystem(new NioLocalFileSystem());
            checked.initialize(given.getUri(), conf);
            local = checked;
        } else {
            local = given;
        }
    }

    public FileSystem fs() {
        return local;
    }
}
