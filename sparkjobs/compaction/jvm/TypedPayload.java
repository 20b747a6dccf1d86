/*
 * A payload's typed columns in one pass (issue 48; sparkjobs/compaction/typed.py says
 * what a column takes, and sparkjobs/compaction/typedjvm.py how the job calls this).
 *
 * The payload's JSON text is read once, by Jackson's streaming parser, into a small tree
 * that keeps where each value starts in the text. Each field of the plan (the table's
 * payload schema, as typedjvm.py writes it) is then taken when its value fits its column
 * without loss, by the rules typed.py's Spark expressions apply; a value that does not
 * fit leaves its column null and goes to the rescued column as its own text, verbatim.
 *
 * Returned per row: the payload struct (null unless the text is one JSON object), the
 * rescued values as a JSON object by pointer, the "residual" (the payload's fields that
 * have no column, and the rescued values, at their places: what the run's schema does
 * not already hold, for the window's shape) and the indexes of the places rescued, as
 * text ("3,7"), which PlaceCounts adds up over the window in one aggregate.
 *
 * What Spark's JSON parser (parse_json) refuses is refused here too, so that both read
 * the same payloads: duplicate keys, a string with a lone surrogate. What follows the
 * first value is ignored, as parse_json ignores it.
 */
package kinesislander.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.base.ParserBase;
import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.catalyst.util.DateTimeUtils$;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

public final class TypedPayload implements UDF2<String, byte[], Row> {
  private static final long serialVersionUID = 1L;

  private static final JsonFactory JSON =
      JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
  private static final ObjectMapper PLANS = new ObjectMapper();
  private static final Object NO = new Object();
  private static final long EXACT_DOUBLE = 1L << 53;
  private static final long EXACT_FLOAT = 1L << 24;
  private static final BigDecimal LONG_MAX = BigDecimal.valueOf(Long.MAX_VALUE);
  private static final BigDecimal LONG_MIN = BigDecimal.valueOf(Long.MIN_VALUE);
  private static final BigDecimal EPOCH_WHOLE = BigDecimal.TEN.pow(29);
  private static final int MAX_DIGITS = 38;

  private transient byte[] planText;
  private transient Plan plan;

  /**
   * The plan comes as bytes (a binary literal): Spark passes a binary value as it holds
   * it, the literal's one array for every row, so the plan is read once and then known
   * by identity. As a string it was decoded into a new String and compared with the
   * last one, character by character, on every row: a third of the function's CPU.
   */
  @Override
  public Row call(String data, byte[] planText) throws IOException {
    if (data == null) {
      return null;
    }
    if (planText != this.planText) {
      if (plan == null || !Arrays.equals(planText, this.planText)) {
        plan = Plan.read(planText);
      }
      this.planText = planText;
    }
    Node root = parse(data);
    if (root == null || root.kind != Node.OBJ) {
      return RowFactory.create(null, null, null, null);
    }
    Pass pass = new Pass(data, plan.zone);
    StringBuilder residual = new StringBuilder();
    Row payload = pass.fill(root, plan.root, residual);
    return RowFactory.create(
        payload,
        pass.rescued.length() == 0 ? null : pass.rescued.append('}').toString(),
        residual.length() == 0 ? null : "{" + residual + "}",
        pass.places.length() == 0 ? null : pass.places.toString());
  }

  // ---------------------------------------------------------------- the document

  /** A JSON value, and where it starts in the text (its end, for an object or array). */
  static final class Node {
    static final int NULL = 0;
    static final int BOOL = 1;
    static final int STR = 2;
    static final int NUM = 3;
    static final int OBJ = 4;
    static final int ARR = 5;

    final int kind;
    final int start;
    int end = -1;
    boolean flag; // BOOL: the value; NUM: an integer token
    String text; // STR: the value; NUM: the token
    Fields fields;
    List<Node> items;
    Number number; // NUM: Long, BigDecimal (stripped, scale >= 0) or Double
    int numberKind;

    Node(int kind, int start) {
      this.kind = kind;
      this.start = start;
    }

    /** As parse_json stores a number: BIGINT, DECIMAL (at most 38 digits) or DOUBLE. */
    int numberKind() {
      if (numberKind == 0) {
        classify();
      }
      return numberKind;
    }

    Number number() {
      numberKind();
      return number;
    }

    private void classify() {
      if (flag) { // past 64 bits (the parser keeps a long): a decimal up to 38 digits
        int digits = text.length() - (text.startsWith("-") ? 1 : 0);
        if (digits <= MAX_DIGITS) {
          number = new BigDecimal(text);
          numberKind = Kind.DECIMAL;
        } else {
          number = Double.parseDouble(text);
          numberKind = Kind.DOUBLE;
        }
        return;
      }
      if (text.indexOf('e') < 0 && text.indexOf('E') < 0) {
        BigDecimal exact = new BigDecimal(text);
        if (exact.precision() <= MAX_DIGITS && exact.scale() <= MAX_DIGITS) {
          BigDecimal stripped = exact.stripTrailingZeros();
          number = stripped.scale() < 0 ? stripped.setScale(0) : stripped;
          numberKind = Kind.DECIMAL;
          return;
        }
      }
      number = Double.parseDouble(text);
      numberKind = Kind.DOUBLE;
    }

    /** Whether the number is an integer as parse_json keeps it (BIGINT, DECIMAL(p,0)). */
    boolean integral() {
      int k = numberKind();
      return k == Kind.BIGINT || (k == Kind.DECIMAL && ((BigDecimal) number).scale() == 0);
    }

    BigDecimal exact() {
      Number n = number();
      return n instanceof Long ? BigDecimal.valueOf((Long) n) : (BigDecimal) n;
    }

    double asDouble() {
      Number n = number();
      return n instanceof BigDecimal ? ((BigDecimal) n).doubleValue() : n.doubleValue();
    }

    /** The value's own text. */
    String raw(String data) {
      switch (kind) {
        case NULL:
          return "null";
        case BOOL:
          return flag ? "true" : "false";
        case NUM:
          return text;
        case STR:
          return data.substring(start, stringEnd(data));
        default:
          return data.substring(start, end);
      }
    }

    private int stringEnd(String data) {
      int i = start + 1;
      while (true) {
        char c = data.charAt(i);
        if (c == '\\') {
          i += 2;
        } else if (c == '"') {
          return i + 1;
        } else {
          i++;
        }
      }
    }
  }

  /**
   * An object's fields in the text's order (the parser refuses a duplicate name), found
   * by a scan: objects hold a few fields, and names come interned from the parser and
   * the plan alike, so most compare by identity (else by String's cached hash, then
   * text). A hash map per object cost more.
   */
  static final class Fields {
    String[] names = new String[8];
    Node[] values = new Node[8];
    int size;

    void add(String name, Node value) {
      if (size == names.length) {
        names = Arrays.copyOf(names, size * 2);
        values = Arrays.copyOf(values, size * 2);
      }
      names[size] = name;
      values[size++] = value;
    }

    Node get(String name) {
      int hash = name.hashCode();
      for (int i = 0; i < size; i++) {
        String at = names[i];
        if (at == name || (at.hashCode() == hash && at.equals(name))) {
          return values[i];
        }
      }
      return null;
    }
  }

  /** The text's first value; null when parse_json would refuse it. */
  static Node parse(String data) throws IOException {
    // Text decoded from UTF-8 (as Spark's strings are) holds surrogates only in pairs:
    // a lone one can come only from a backslash-u escape; without one, none is checked.
    boolean escaped = data.indexOf("\\u") >= 0;
    try (JsonParser parser = JSON.createParser(data)) {
      JsonToken token = parser.nextToken();
      return token == null ? null : read(parser, token, escaped);
    } catch (com.fasterxml.jackson.core.JacksonException e) {
      return null;
    }
  }

  /** Where the current token starts, as currentTokenLocation says for a value (one
   * before the parser's count, taken after the token's first character), without the
   * location object per token that it makes. */
  private static int offset(JsonParser parser) {
    return (int) ((ParserBase) parser).getTokenCharacterOffset() - 1;
  }

  private static Node read(JsonParser parser, JsonToken token, boolean escaped)
      throws IOException {
    Node node;
    switch (token) {
      case START_OBJECT:
        node = new Node(Node.OBJ, offset(parser));
        node.fields = new Fields();
        for (JsonToken t = parser.nextToken(); t != JsonToken.END_OBJECT; t = parser.nextToken()) {
          String name = parser.currentName();
          if (escaped && !sound(name)) {
            return null;
          }
          Node value = read(parser, parser.nextToken(), escaped);
          if (value == null) {
            return null;
          }
          node.fields.add(name, value);
        }
        node.end = offset(parser) + 1;
        return node;
      case START_ARRAY:
        node = new Node(Node.ARR, offset(parser));
        node.items = new ArrayList<>();
        for (JsonToken t = parser.nextToken(); t != JsonToken.END_ARRAY; t = parser.nextToken()) {
          Node value = read(parser, t, escaped);
          if (value == null) {
            return null;
          }
          node.items.add(value);
        }
        node.end = offset(parser) + 1;
        return node;
      case VALUE_STRING:
        node = new Node(Node.STR, offset(parser));
        node.text = parser.getText();
        return !escaped || sound(node.text) ? node : null;
      case VALUE_NUMBER_INT:
        node = new Node(Node.NUM, offset(parser));
        node.text = parser.getText();
        node.flag = true;
        if (parser.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
          node.number = parser.getLongValue();
          node.numberKind = Kind.BIGINT;
        }
        return node;
      case VALUE_NUMBER_FLOAT:
        node = new Node(Node.NUM, offset(parser));
        node.text = parser.getText();
        return node;
      case VALUE_TRUE:
      case VALUE_FALSE:
        node = new Node(Node.BOOL, offset(parser));
        node.flag = token == JsonToken.VALUE_TRUE;
        return node;
      case VALUE_NULL:
        return new Node(Node.NULL, offset(parser));
      default:
        return null;
    }
  }

  /** Whether a string is well-formed UTF-16 (parse_json refuses a lone surrogate). */
  private static boolean sound(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
          return false;
        }
        i++;
      } else if (Character.isLowSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  // ---------------------------------------------------------------- the plan

  /** Column types, as typedjvm.py names them. */
  static final class Kind {
    static final int BIGINT = 1; // number kinds of a node
    static final int DECIMAL = 2;
    static final int DOUBLE = 3;

    static final int BOOLEAN = 10;
    static final int STRING = 11;
    static final int INT = 12;
    static final int LONG = 13;
    static final int FLOAT = 14;
    static final int DOUBLE_COLUMN = 15;
    static final int DECIMAL_COLUMN = 16;
    static final int TIMESTAMP = 17;
    static final int STRUCT = 18;
    static final int LIST = 19;
  }

  /** A column's type. */
  static final class Type {
    int kind;
    int precision;
    int scale;
    BigInteger limit; // DECIMAL_COLUMN: 10^precision
    Pattern text; // DECIMAL_COLUMN: a number in a string it takes
    int perSecond; // TIMESTAMP: 0 for ISO-8601 text, else epoch units per second
    Column[] columns; // STRUCT
    Map<String, Column> byName;
    Type element; // LIST
    boolean holdsStruct; // a struct inside (a list's elements may have new fields)
  }

  /** A struct's field. */
  static final class Column {
    String name;
    Type type;
    int place; // its index among the places values are rescued at
    String key; // "pointer": as JSON, for the rescued object
  }

  static final class Plan {
    Type root;
    ZoneId zone;

    static Plan read(byte[] text) throws IOException {
      JsonNode node = PLANS.readTree(text);
      Plan plan = new Plan();
      plan.zone = ZoneId.of(node.get("zone").asText());
      plan.root = type(node.get("type"));
      return plan;
    }

    private static Type type(JsonNode node) {
      Type t = new Type();
      String kind = node.get("kind").asText();
      switch (kind) {
        case "boolean":
          t.kind = Kind.BOOLEAN;
          break;
        case "string":
          t.kind = Kind.STRING;
          break;
        case "int":
          t.kind = Kind.INT;
          break;
        case "long":
          t.kind = Kind.LONG;
          break;
        case "float":
          t.kind = Kind.FLOAT;
          break;
        case "double":
          t.kind = Kind.DOUBLE_COLUMN;
          break;
        case "decimal":
          t.kind = Kind.DECIMAL_COLUMN;
          t.precision = node.get("precision").asInt();
          t.scale = node.get("scale").asInt();
          t.limit = BigInteger.TEN.pow(t.precision);
          t.text = Pattern.compile("-?[0-9]+(\\.[0-9]{0," + t.scale + "}0*)?");
          break;
        case "timestamp":
          t.kind = Kind.TIMESTAMP;
          t.perSecond = node.get("per_second").asInt();
          break;
        case "struct":
          t.kind = Kind.STRUCT;
          JsonNode fields = node.get("fields");
          t.columns = new Column[fields.size()];
          t.byName = new HashMap<>();
          t.holdsStruct = true;
          for (int i = 0; i < fields.size(); i++) {
            JsonNode f = fields.get(i);
            Column c = new Column();
            // Interned, as the parser interns the names it reads: a lookup by name then
            // matches by identity, not character by character.
            c.name = f.get("name").asText().intern();
            c.type = type(f.get("type"));
            c.place = f.get("place").asInt();
            c.key = f.get("key").asText();
            t.columns[i] = c;
            t.byName.put(c.name, c);
          }
          break;
        case "list":
          t.kind = Kind.LIST;
          t.element = type(node.get("element"));
          t.holdsStruct = t.element.holdsStruct;
          break;
        default:
          throw new IllegalArgumentException("unknown column kind " + kind);
      }
      return t;
    }
  }

  // ---------------------------------------------------------------- the typing

  /** One row's typing: the rescued values so far, and their places. */
  static final class Pass {
    final String data;
    final ZoneId zone;
    final StringBuilder rescued = new StringBuilder();
    final StringBuilder places = new StringBuilder(0); // "3,7": indexes, comma-separated

    Pass(String data, ZoneId zone) {
      this.data = data;
      this.zone = zone;
    }

    /** An object's struct, field by field; its residual (fields inside braces) added to
     * ``residual``. */
    Row fill(Node object, Type struct, StringBuilder residual) {
      Object[] values = new Object[struct.columns.length];
      for (int i = 0; i < struct.columns.length; i++) {
        Column c = struct.columns[i];
        Node node = object.fields.get(c.name);
        if (node == null || node.kind == Node.NULL) {
          continue;
        }
        if (c.type.kind == Kind.STRUCT && node.kind == Node.OBJ) {
          StringBuilder inner = new StringBuilder();
          values[i] = fill(node, c.type, inner);
          if (inner.length() > 0) {
            field(residual, c.name).append('{').append(inner).append('}');
          }
          continue;
        }
        Object value = c.type.kind == Kind.STRUCT ? NO : take(node, c.type);
        if (value == NO) {
          rescued.append(rescued.length() == 0 ? "{" : ",").append(c.key).append(':');
          rescued.append(node.raw(data));
          places.append(places.length() == 0 ? "" : ",").append(c.place);
          field(residual, c.name).append(node.raw(data));
          continue;
        }
        values[i] = value;
        if (c.type.holdsStruct) {
          String inner = residualOf(node, c.type);
          if (inner != null) {
            field(residual, c.name).append(inner);
          }
        }
      }
      Fields all = object.fields;
      for (int i = 0; i < all.size; i++) {
        if (!struct.byName.containsKey(all.names[i])) {
          field(residual, all.names[i]).append(all.values[i].raw(data));
        }
      }
      return RowFactory.create(values);
    }

    /** A taken value's fields that have no column (inside a list's structs), or null. */
    private String residualOf(Node node, Type type) {
      if (type.kind == Kind.STRUCT) {
        StringBuilder inner = new StringBuilder();
        Fields all = node.fields;
        for (int i = 0; i < all.size; i++) {
          Column c = type.byName.get(all.names[i]);
          Node value = all.values[i];
          if (c == null) {
            field(inner, all.names[i]).append(value.raw(data));
          } else if (c.type.holdsStruct && value.kind != Node.NULL) {
            String deeper = residualOf(value, c.type);
            if (deeper != null) {
              field(inner, c.name).append(deeper);
            }
          }
        }
        return inner.length() == 0 ? null : "{" + inner + "}";
      }
      StringBuilder items = new StringBuilder("[");
      boolean any = false;
      for (Node item : node.items) {
        String deeper = item.kind == Node.NULL ? null : residualOf(item, type.element);
        any |= deeper != null;
        items.append(items.length() > 1 ? "," : "").append(deeper == null ? "null" : deeper);
      }
      return any ? items.append(']').toString() : null;
    }

    /** ``out`` with the next field's name and colon. */
    private static StringBuilder field(StringBuilder out, String name) {
      if (out.length() > 0) {
        out.append(',');
      }
      out.append('"');
      JsonStringEncoder.getInstance().quoteAsString(name, out);
      return out.append("\":");
    }

    /** A non-null value taken whole for a column of ``type``, or NO when it does not fit. */
    Object take(Node node, Type type) {
      switch (type.kind) {
        case Kind.BOOLEAN:
          return node.kind == Node.BOOL ? (Object) node.flag : NO;
        case Kind.STRING:
          return node.kind == Node.STR ? node.text : NO;
        case Kind.INT:
          if (node.kind == Node.NUM && node.numberKind() == Kind.BIGINT) {
            long v = (Long) node.number();
            return v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE ? (Object) (int) v : NO;
          }
          return NO;
        case Kind.LONG:
          return node.kind == Node.NUM && node.numberKind() == Kind.BIGINT ? node.number() : NO;
        case Kind.DOUBLE_COLUMN:
        case Kind.FLOAT:
          return floating(node, type.kind == Kind.FLOAT);
        case Kind.DECIMAL_COLUMN:
          return decimal(node, type);
        case Kind.TIMESTAMP:
          return timestamp(node, type.perSecond);
        case Kind.STRUCT:
          return struct(node, type);
        case Kind.LIST:
          return list(node, type);
        default:
          return NO;
      }
    }

    private Object floating(Node node, boolean single) {
      if (node.kind != Node.NUM) {
        return NO;
      }
      double value = node.asDouble();
      if (Double.isNaN(value) || Double.isInfinite(value)) {
        return NO;
      }
      if (node.integral()) {
        BigInteger whole = node.exact().toBigIntegerExact().abs();
        if (whole.compareTo(BigInteger.valueOf(single ? EXACT_FLOAT : EXACT_DOUBLE)) > 0) {
          return NO;
        }
      }
      if (!single) {
        return value;
      }
      float f = (float) value;
      return (double) f == value ? (Object) f : NO;
    }

    private Object decimal(Node node, Type type) {
      BigDecimal exact;
      if (node.kind == Node.NUM) {
        int k = node.numberKind();
        if (k == Kind.DOUBLE) {
          return NO;
        }
        exact = node.exact();
        if (exact.scale() > type.scale) {
          return NO;
        }
      } else if (node.kind == Node.STR && type.text.matcher(node.text).matches()) {
        exact = new BigDecimal(node.text);
      } else {
        return NO;
      }
      BigDecimal scaled = exact.setScale(type.scale, RoundingMode.UNNECESSARY);
      return scaled.unscaledValue().abs().compareTo(type.limit) < 0 ? scaled : NO;
    }

    private Object timestamp(Node node, int perSecond) {
      long micros;
      if (perSecond == 0) {
        if (node.kind != Node.STR) {
          return NO;
        }
        Option<Object> parsed =
            DateTimeUtils$.MODULE$.stringToTimestamp(UTF8String.fromString(node.text), zone);
        if (parsed.isEmpty()) {
          return NO;
        }
        micros = (Long) parsed.get();
      } else {
        if (node.kind != Node.NUM || node.numberKind() == Kind.DOUBLE) {
          return NO;
        }
        // As Spark computes it: the number at 9 decimals (half up), times the micros per
        // unit at 6 decimals (half up), then toward zero.
        BigDecimal number = node.exact().setScale(9, RoundingMode.HALF_UP);
        if (number.abs().compareTo(EPOCH_WHOLE) >= 0) {
          return NO;
        }
        BigDecimal product =
            number
                .multiply(BigDecimal.valueOf(1_000_000L / perSecond))
                .setScale(6, RoundingMode.HALF_UP)
                .setScale(0, RoundingMode.DOWN);
        if (product.compareTo(LONG_MAX) > 0 || product.compareTo(LONG_MIN) < 0) {
          return NO;
        }
        micros = product.longValueExact();
      }
      return Instant.ofEpochSecond(
          Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
    }

    /** A struct inside a list: every field fits, or the whole does not. */
    private Object struct(Node node, Type type) {
      if (node.kind != Node.OBJ) {
        return NO;
      }
      Object[] values = new Object[type.columns.length];
      for (int i = 0; i < type.columns.length; i++) {
        Node value = node.fields.get(type.columns[i].name);
        if (value != null && value.kind != Node.NULL) {
          Object v = take(value, type.columns[i].type);
          if (v == NO) {
            return NO;
          }
          values[i] = v;
        }
      }
      return RowFactory.create(values);
    }

    /** A list: every element fits (a null does), or the whole does not. */
    private Object list(Node node, Type type) {
      if (node.kind != Node.ARR) {
        return NO;
      }
      Object[] values = new Object[node.items.size()];
      for (int i = 0; i < values.length; i++) {
        Node item = node.items.get(i);
        if (item.kind != Node.NULL) {
          Object v = take(item, type.element);
          if (v == NO) {
            return NO;
          }
          values[i] = v;
        }
      }
      return Arrays.asList(values);
    }
  }

  /**
   * How many rows rescued a value at each place, from each row's places ("3,7"; null:
   * none), as one aggregate: a count per place as Spark's own count_if evaluates every
   * counter on every row. The result is the counts as decimal text, comma-separated,
   * as many as the highest place seen plus one.
   */
  public static final class PlaceCounts extends Aggregator<String, long[], String> {
    private static final long serialVersionUID = 1L;

    /** Register the aggregate in the session under name (from Python, through py4j). */
    public static void register(SparkSession spark, String name) {
      spark.udf().register(name, functions.udaf(new PlaceCounts(), Encoders.STRING()));
    }

    @Override
    public long[] zero() {
      return new long[0];
    }

    @Override
    public long[] reduce(long[] counts, String places) {
      if (places == null) {
        return counts;
      }
      int start = 0;
      while (start < places.length()) {
        int end = places.indexOf(',', start);
        end = end < 0 ? places.length() : end;
        int place = Integer.parseInt(places, start, end, 10);
        if (place >= counts.length) {
          counts = Arrays.copyOf(counts, place + 1);
        }
        counts[place]++;
        start = end + 1;
      }
      return counts;
    }

    @Override
    public long[] merge(long[] counts, long[] other) {
      long[] sum = counts.length >= other.length ? counts : Arrays.copyOf(counts, other.length);
      for (int i = 0; i < other.length; i++) {
        sum[i] += other[i];
      }
      return sum;
    }

    @Override
    public String finish(long[] counts) {
      StringBuilder text = new StringBuilder();
      for (int i = 0; i < counts.length; i++) {
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
