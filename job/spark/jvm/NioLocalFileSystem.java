package daggers.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, with a file's permission set by a system call through java.nio. Without
 * Hadoop's native library (which pyspark does not ship), RawLocalFileSystem sets the permission of every
 * file and folder it creates by starting a `chmod` process: a micro-batch's checkpoint files (offsets,
 * commit, state changelogs, each with its checksum file) started ~10 of them (2 state partitions). The
 * permission set is the same; a sticky bit, which java.nio cannot set, and a file system without POSIX
 * permissions keep Hadoop's way.
 */
public class NioLocalFileSystem extends RawLocalFileSystem {
    public void setPermission(Path p, FsPermission permission) throws IOException {
        if (permission.getStickyBit()) {
            super.setPermission(p, permission);
            return;
        }
        try {
            Files.setPosixFilePermissions(
                pathToFile(p).toPath(), PosixFilePermissions.fromString(permission.toString()));
        } catch (UnsupportedOperationException notPosix) {
            super.setPermission(p, permission);
        }
    }
}
