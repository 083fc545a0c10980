package daggers.spark;

import java.io.IOException;
import java.nio.file.Files;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, with a file's permission set by a system call through java.nio. Without
 * Hadoop's native library (which pyspark does not ship), RawLocalFileSystem sets the permission of every
 * file and folder it creates by starting a `chmod` process: a micro-batch's checkpoint files (offsets,
 * commit, state changelogs, each with its checksum file) started ~10 of them (2 state partitions). The mode
 * set is the one `chmod 0755` gives: the permission and its sticky bit, and a folder keeps its set-user-ID
 * and set-group-ID bits (a checkpoint under a group's shared setgid folder stays the group's). A file
 * system without Unix modes keeps Hadoop's way.
 */
public class NioLocalFileSystem extends RawLocalFileSystem {
    /** The set-user-ID and set-group-ID bits, which `chmod` with 4 octal digits keeps on a folder. */
    private static final int SET_ID_BITS = 06000;

    public void setPermission(Path p, FsPermission permission) throws IOException {
        java.nio.file.Path file = pathToFile(p).toPath();
        try {
            int mode = permission.toShort() & 01777;
            if (Files.isDirectory(file)) {
                int now = ((Integer) Files.getAttribute(file, "unix:mode")).intValue();
                mode |= now & SET_ID_BITS;
            }
            Files.setAttribute(file, "unix:mode", Integer.valueOf(mode));
        } catch (UnsupportedOperationException noUnixModes) {
            super.setPermission(p, permission);
        } catch (IllegalArgumentException noUnixModes) {
            super.setPermission(p, permission);
        }
    }
}
