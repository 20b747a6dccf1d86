/*
 * The lines of one landed object, for the compaction's fast read (sparkjobs/objectreader.py).
 *
 * Spark's text reader costs about 0.7 ms per file before it reads a byte: each file's
 * reader copies the job's whole Hadoop Configuration (1,100 keys) and scans it again for
 * options. A day is ~8,800 small objects, so the compaction reads them with Spark's
 * binaryFile source (one row per object, its bytes) and this function, which inflates
 * the bytes and splits them into lines.
 *
 * It is strict where the text reader trusts the stream: every gzip member's header,
 * CRC-32 and length are checked, and anything after the last member but another member
 * is an error. Any damage throws, which fails the run's fast path; the job then checks
 * every object (sparkjobs/integrity.py) and reads only sound ones, as it does for the
 * text reader.
 *
 * Lines end at LF, CR or CRLF, as Hadoop's LineReader splits them; a last line without
 * its newline is still a line. The bytes of a line are returned as they are (the job
 * casts them to a string without decoding, as the text reader does).
 */
package kinesislander.spark;

import java.io.EOFException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.deploy.SparkHadoopUtil;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF2;

public final class LandedObjectLines implements UDF1<byte[], List<byte[]>> {
  private static final long serialVersionUID = 1L;

  private static final int CHUNK = 1 << 16;
  private static final int FHCRC = 2;
  private static final int FEXTRA = 4;
  private static final int FNAME = 8;
  private static final int FCOMMENT = 16;
  private static final int RESERVED = 0xe0;

  /** The object's lines; null for a null object. Throws on anything but sound gzip. */
  @Override
  public List<byte[]> call(byte[] object) throws IOException {
    if (object == null) {
      return null;
    }
    if (object.length == 0) {
      throw new IOException("empty object (a landed file is at least a gzip header)");
    }
    Lines lines = new Lines();
    byte[] chunk = new byte[CHUNK];
    Inflater inflater = new Inflater(true);
    try {
      int at = 0;
      while (at < object.length) {
        if (at > 0 && !magic(object, at)) {
          throw new IOException((object.length - at) + " bytes of junk after the gzip stream");
        }
        at = member(object, at, inflater, chunk, lines);
        inflater.reset();
      }
    } finally {
      inflater.end();
    }
    return lines.finish();
  }

  /**
   * The lines of a landed object read by its path, for a run that knows its objects from
   * its own listing, so that no folder is listed again (on S3 a day is thousands of
   * minute folders, one LIST each). The arguments are the object's URI and its listed
   * size; an object that is not that size any more is an error, as damage is.
   */
  public static final class FromPath implements UDF2<String, Long, List<byte[]>> {
    private static final long serialVersionUID = 1L;
    private static volatile Configuration conf;

    @Override
    public List<byte[]> call(String uri, Long size) throws IOException {
      if (uri == null || size == null) {
        return null;
      }
      Path path = new Path(uri);
      byte[] object = new byte[Math.toIntExact(size)];
      try (FSDataInputStream in = path.getFileSystem(configuration()).open(path)) {
        in.readFully(object);
        if (in.read() != -1) {
          throw new IOException(uri + ": longer than the " + size + " bytes listed");
        }
      } catch (EOFException e) {
        throw new IOException(uri + ": shorter than the " + size + " bytes listed", e);
      }
      try {
        return new LandedObjectLines().call(object);
      } catch (IOException e) {
        throw new IOException(uri + ": " + e.getMessage(), e);
      }
    }

    /** The job's Hadoop settings (spark.hadoop.*), built once per JVM: building one
     * copies about 1,100 keys, which is what reading by Spark's sources pays per file. */
    private static Configuration configuration() {
      Configuration found = conf;
      if (found == null) {
        synchronized (FromPath.class) {
          if (conf == null) {
            conf = SparkHadoopUtil.get().newConfiguration(SparkEnv.get().conf());
          }
          found = conf;
        }
      }
      return found;
    }
  }

  private static boolean magic(byte[] b, int at) {
    return at + 1 < b.length && (b[at] & 0xff) == 0x1f && (b[at + 1] & 0xff) == 0x8b;
  }

  /** Decodes the member at {@code at} into {@code lines}; where the next one starts. */
  private static int member(byte[] b, int at, Inflater inflater, byte[] chunk, Lines lines)
      throws IOException {
    int body = header(b, at);
    inflater.setInput(b, body, b.length - body);
    CRC32 crc = new CRC32();
    long size = 0;
    try {
      while (!inflater.finished()) {
        int n = inflater.inflate(chunk);
        if (n > 0) {
          crc.update(chunk, 0, n);
          size += n;
          lines.add(chunk, n);
        } else if (inflater.needsInput()) {
          throw new IOException("gzip stream ends early");
        } else if (inflater.needsDictionary()) {
          throw new IOException("bad gzip data: a preset dictionary");
        }
      }
    } catch (DataFormatException e) {
      throw new IOException("bad gzip data: " + e.getMessage(), e);
    }
    int trailer = b.length - inflater.getRemaining();
    if (trailer + 8 > b.length) {
      throw new IOException("gzip stream ends early");
    }
    if ((int) crc.getValue() != le32(b, trailer)) {
      throw new IOException("bad gzip data: CRC-32 mismatch");
    }
    if ((int) size != le32(b, trailer + 4)) {
      throw new IOException("bad gzip data: length mismatch");
    }
    return trailer + 8;
  }

  /** Checks a member's header (RFC 1952); where its deflate data starts. */
  private static int header(byte[] b, int at) throws IOException {
    if (!magic(b, at)) {
      throw new IOException("not gzip");
    }
    if (at + 10 > b.length) {
      throw new IOException("gzip stream ends early");
    }
    if ((b[at + 2] & 0xff) != 8) {
      throw new IOException("bad gzip data: unknown compression method");
    }
    int flags = b[at + 3] & 0xff;
    if ((flags & RESERVED) != 0) {
      throw new IOException("bad gzip data: reserved header flags");
    }
    int pos = at + 10;
    if ((flags & FEXTRA) != 0) {
      if (pos + 2 > b.length) {
        throw new IOException("gzip stream ends early");
      }
      pos += 2 + ((b[pos] & 0xff) | (b[pos + 1] & 0xff) << 8);
    }
    if ((flags & FNAME) != 0) {
      pos = afterZero(b, pos);
    }
    if ((flags & FCOMMENT) != 0) {
      pos = afterZero(b, pos);
    }
    if ((flags & FHCRC) != 0) {
      pos += 2;
    }
    if (pos > b.length) {
      throw new IOException("gzip stream ends early");
    }
    return pos;
  }

  private static int afterZero(byte[] b, int pos) throws IOException {
    for (int i = pos; i < b.length; i++) {
      if (b[i] == 0) {
        return i + 1;
      }
    }
    throw new IOException("gzip stream ends early");
  }

  private static int le32(byte[] b, int at) {
    return (b[at] & 0xff)
        | (b[at + 1] & 0xff) << 8
        | (b[at + 2] & 0xff) << 16
        | (b[at + 3] & 0xff) << 24;
  }

  /** Splits decoded bytes into lines at LF, CR and CRLF, across chunks. */
  static final class Lines {
    private final List<byte[]> done = new ArrayList<>();
    private byte[] partial = new byte[256];
    private int length;
    private boolean afterCr;

    void add(byte[] chunk, int n) {
      int start = 0;
      for (int i = 0; i < n; i++) {
        byte c = chunk[i];
        if (c == '\n' && afterCr) {
          afterCr = false; // the LF of a CRLF whose CR ended the line just before
          start = i + 1;
          continue;
        }
        afterCr = false;
        if (c == '\n' || c == '\r') {
          emit(chunk, start, i);
          afterCr = c == '\r';
          start = i + 1;
        }
      }
      append(chunk, start, n);
    }

    private void emit(byte[] chunk, int from, int to) {
      if (length == 0) {
        done.add(Arrays.copyOfRange(chunk, from, to));
      } else {
        append(chunk, from, to);
        done.add(Arrays.copyOf(partial, length));
        length = 0;
      }
    }

    private void append(byte[] chunk, int from, int to) {
      int n = to - from;
      if (n == 0) {
        return;
      }
      if (length + n > partial.length) {
        partial = Arrays.copyOf(partial, Math.max(partial.length * 2, length + n));
      }
      System.arraycopy(chunk, from, partial, length, n);
      length += n;
    }

    List<byte[]> finish() {
      if (length > 0) {
        done.add(Arrays.copyOf(partial, length));
        length = 0;
      }
      return done;
    }
  }
}
