/*
 * The lines of one landed object, for the compaction's fast read (sparkjobs/compaction/objectreader.py).
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
 * every object (consumer/archive/codec.py) and reads only sound ones, as it does for the
 * text reader.
 *
 * Lines end at LF, CR or CRLF, as Hadoop's LineReader splits them; a last line without
 * its newline is still a line. The bytes of a line are returned as they are (the job
 * casts them to a string without decoding, as the text reader does).
 */
package kinesislander.spark;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.deploy.SparkHadoopUtil;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;

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
      try (InputStream in = open(path)) {
        if (in.readNBytes(object, 0, object.length) < object.length) {
          throw new IOException(uri + ": shorter than the " + size + " bytes listed");
        }
        if (in.read() != -1) {
          throw new IOException(uri + ": longer than the " + size + " bytes listed");
        }
      }
      try {
        return new LandedObjectLines().call(object);
      } catch (IOException e) {
        throw new IOException(uri + ": " + e.getMessage(), e);
      }
    }

    /**
     * A local object straight from the filesystem: Hadoop's local filesystem stats the
     * file and looks for a .crc file beside it on every open (a landed object has none;
     * its gzip CRC-32s are checked here), which cost about as much as inflating it.
     */
    private static InputStream open(Path path) throws IOException {
      URI uri = path.toUri();
      if ("file".equals(uri.getScheme()) && uri.getAuthority() == null) {
        return Files.newInputStream(Paths.get(uri.getPath()));
      }
      return path.getFileSystem(configuration()).open(path);
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

  /**
   * A line's header fields and payload, for a line in exactly the form the lander writes
   * (consumer/landing/envelope.py), without a JSON parser: Spark's from_json builds a
   * Jackson parser per line, the largest single cost of the compaction's parse. Any other
   * line gives null, and the job parses it with from_json (sparkjobs/compaction/lines.py), so this
   * only has to agree with from_json on the form it accepts:
   *
   * <pre>{"stream":S,"shard_id":S,"sequence_number":S,"subsequence_number":N,
   * "partition_key":S,"arrival_ts":S[,"event_id":S or null],"data":PAYLOAD}</pre>
   *
   * on one line, keys in that order, no blanks; S a JSON string of printable ASCII
   * without escapes; N a non-negative integer of at most 18 digits without leading
   * zeros. PAYLOAD is the bytes between the first ,"data": and the line's last byte,
   * which must be }: the slice the job takes on its exact path, kept as bytes.
   */
  public static final class Header implements UDF1<byte[], Row> {
    private static final long serialVersionUID = 1L;
    private static final byte[] STREAM = ascii("{\"stream\":");
    private static final byte[] SHARD = ascii(",\"shard_id\":");
    private static final byte[] SEQUENCE = ascii(",\"sequence_number\":");
    private static final byte[] SUBSEQUENCE = ascii(",\"subsequence_number\":");
    private static final byte[] KEY = ascii(",\"partition_key\":");
    private static final byte[] ARRIVAL = ascii(",\"arrival_ts\":");
    private static final byte[] EVENT = ascii(",\"event_id\":");
    private static final byte[] NULL = ascii("null");
    private static final byte[] NONE = new byte[0];
    private static final byte[] DATA = ascii(",\"data\":");
    private static final int LONG_DIGITS = 18;

    /** The fields in the order of sparkjobs.compaction.objectreader.HEADER_TYPE; null if the line
     * is not in the form above. */
    @Override
    public Row call(byte[] line) {
      if (line == null) {
        return null;
      }
      Cursor c = new Cursor(line);
      String stream = c.string(STREAM);
      String shardId = c.string(SHARD);
      String sequenceNumber = c.string(SEQUENCE);
      long subsequenceNumber = c.number(SUBSEQUENCE);
      String partitionKey = c.string(KEY);
      String arrivalTs = c.string(ARRIVAL);
      String eventId = c.skip(EVENT) && !c.skip(NULL) ? c.string(NONE) : null;
      if (!c.skip(DATA) || c.at >= line.length || line[line.length - 1] != '}') {
        return null; // a step above failed (the cursor is at -1), or no final brace
      }
      byte[] payload = Arrays.copyOfRange(line, c.at, line.length - 1);
      return RowFactory.create(
          stream, shardId, sequenceNumber, subsequenceNumber, partitionKey, arrivalTs, eventId,
          payload);
    }

    private static byte[] ascii(String text) {
      return text.getBytes(StandardCharsets.US_ASCII);
    }

    /** A position in a line; -1 once a step failed, after which every step fails. */
    private static final class Cursor {
      private final byte[] line;
      int at;

      Cursor(byte[] line) {
        this.line = line;
      }

      /** Steps over {@code expected} if the line has it here; whether it did. */
      boolean skip(byte[] expected) {
        if (at < 0 || at + expected.length > line.length) {
          return false;
        }
        for (int i = 0; i < expected.length; i++) {
          if (line[at + i] != expected[i]) {
            return false;
          }
        }
        at += expected.length;
        return true;
      }

      /** {@code key}, then a JSON string of printable ASCII without escapes: its text. */
      String string(byte[] key) {
        if (!skip(key) || at >= line.length || line[at] != '"') {
          at = -1;
          return null;
        }
        for (int i = at + 1; i < line.length; i++) {
          byte b = line[i];
          if (b == '"') {
            String text = new String(line, at + 1, i - at - 1, StandardCharsets.US_ASCII);
            at = i + 1;
            return text;
          }
          if (b < 0x20 || b > 0x7e || b == '\\') {
            break;
          }
        }
        at = -1;
        return null;
      }

      /** {@code key}, then a non-negative integer of at most 18 digits without leading
       * zeros (a longer one may not fit a long, from_json's type for it). */
      long number(byte[] key) {
        if (!skip(key)) {
          at = -1;
          return 0;
        }
        int end = at;
        long value = 0;
        while (end < line.length && line[end] >= '0' && line[end] <= '9') {
          value = value * 10 + (line[end] - '0');
          end++;
        }
        int n = end - at;
        if (n == 0 || n > LONG_DIGITS || (n > 1 && line[at] == '0')) {
          at = -1;
          return 0;
        }
        at = end;
        return value;
      }
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

  /**
   * How many rows carry each small code (0 to CODES - 1; null: not counted), as one
   * aggregate: the compaction's per hour and cause counts (sparkjobs/compaction/counters.py). A
   * count per code as Spark's own count(CASE WHEN code = k ...) evaluates every counter
   * on every row, about 100 of them for a day; this adds one to one field. The result
   * is the counts as decimal text, comma-separated (Java's encoders have no array).
   */
  public static final class Counts extends Aggregator<Integer, long[], String> {
    private static final long serialVersionUID = 1L;
    /** The codes counted: a day's 24 hours times the compaction's 5 causes fit. */
    public static final int CODES = 128;

    /** Register the aggregate in the session under name (from Python, through py4j). */
    public static void register(SparkSession spark, String name) {
      spark.udf().register(name, functions.udaf(new Counts(), Encoders.INT()));
    }

    @Override
    public long[] zero() {
      return new long[CODES];
    }

    @Override
    public long[] reduce(long[] counts, Integer code) {
      if (code == null) {
        return counts;
      }
      if (code < 0 || code >= CODES) {
        throw new IllegalArgumentException("code " + code + " is not in 0.." + (CODES - 1));
      }
      counts[code]++;
      return counts;
    }

    @Override
    public long[] merge(long[] counts, long[] other) {
      for (int i = 0; i < CODES; i++) {
        counts[i] += other[i];
      }
      return counts;
    }

    @Override
    public String finish(long[] counts) {
      StringBuilder text = new StringBuilder();
      for (int i = 0; i < CODES; i++) {
        text.append(i == 0 ? "" : ",").append(counts[i]);
      }
      return text.toString();
    }

    @Override
    public Encoder<long[]> bufferEncoder() {
      return Encoders.javaSerialization(long[].class);
    }

    @Override
    public Encoder<String> outputEncoder() {
      return Encoders.STRING();
    }
  }
}
