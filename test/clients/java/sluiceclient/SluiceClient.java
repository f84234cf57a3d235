package sluiceclient;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The HTTP side of the client: java.net.http with its defaults, bodies from a default
 * ObjectMapper, scope headers and, when secrets are given, the signature-mode token of
 * docs/auth.md on every request.
 */
public final class SluiceClient {
  /** Which secret signs a request: app tokens, or internal ones for the internal script endpoints. */
  public enum Credential {
    APP,
    INTERNAL
  }

  /** One answer: HTTP status, headers and the body as text. */
  public static final class Reply {
    public final int httpStatus;
    public final java.net.http.HttpHeaders headers;
    public final String body;

    Reply(HttpResponse<String> res) {
      this.httpStatus = res.statusCode();
      this.headers = res.headers();
      this.body = res.body();
    }

    public String header(String name) {
      return headers.firstValue(name).orElse(null);
    }
  }

  public final ObjectMapper mapper = new ObjectMapper();
  private final HttpClient http = HttpClient.newHttpClient();
  private final String baseUrl;
  private final String app;
  private final String space;
  private final String user;
  private final String appSecret;
  private final String internalSecret;

  public SluiceClient(
      String baseUrl,
      String app,
      String space,
      String user,
      String appSecret,
      String internalSecret) {
    this.baseUrl = baseUrl.replaceAll("/+$", "");
    this.app = app;
    this.space = space;
    this.user = user;
    this.appSecret = appSecret;
    this.internalSecret = internalSecret;
  }

  public static String query(Map<String, String> params) {
    StringBuilder q = new StringBuilder();
    for (Map.Entry<String, String> e : params.entrySet()) {
      q.append(q.length() == 0 ? '?' : '&')
          .append(URLEncoder.encode(e.getKey(), StandardCharsets.UTF_8))
          .append('=')
          .append(URLEncoder.encode(e.getValue(), StandardCharsets.UTF_8));
    }
    return q.toString();
  }

  public Reply postJson(String path, Object body, Credential credential)
      throws IOException, InterruptedException {
    HttpRequest.Builder req =
        request(path, credential)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofByteArray(mapper.writeValueAsBytes(body)));
    return send(req);
  }

  public Reply get(String path, Credential credential) throws IOException, InterruptedException {
    return send(request(path, credential).GET());
  }

  /** multipart/form-data written by hand, the way most Java teams without a framework do it. */
  public Reply postMultipart(
      String path, Map<String, String> fields, String fileField, List<Path> files, Credential credential)
      throws IOException, InterruptedException {
    String boundary = "----SluiceJavaClient" + UUID.randomUUID().toString().replace("-", "");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (Map.Entry<String, String> field : fields.entrySet()) {
      write(out, "--" + boundary + "\r\n");
      write(out, "Content-Disposition: form-data; name=\"" + field.getKey() + "\"\r\n\r\n");
      write(out, field.getValue() + "\r\n");
    }
    for (Path file : files) {
      write(out, "--" + boundary + "\r\n");
      write(
          out,
          "Content-Disposition: form-data; name=\""
              + fileField
              + "\"; filename=\""
              + file.getFileName()
              + "\"\r\n");
      write(out, "Content-Type: text/x-python\r\n\r\n");
      out.write(Files.readAllBytes(file));
      write(out, "\r\n");
    }
    write(out, "--" + boundary + "--\r\n");
    HttpRequest.Builder req =
        request(path, credential)
            .header("Content-Type", "multipart/form-data; boundary=" + boundary)
            .POST(HttpRequest.BodyPublishers.ofByteArray(out.toByteArray()));
    return send(req);
  }

  public Responses.Envelope envelope(Reply reply) throws IOException {
    return mapper.readValue(reply.body, Responses.Envelope.class);
  }

  private static void write(ByteArrayOutputStream out, String text) {
    out.writeBytes(text.getBytes(StandardCharsets.UTF_8));
  }

  private HttpRequest.Builder request(String path, Credential credential) {
    HttpRequest.Builder req =
        HttpRequest.newBuilder(URI.create(baseUrl + path))
            .timeout(Duration.ofSeconds(120))
            .header("app", app)
            .header("space", space)
            .header("user", user);
    String secret = credential == Credential.INTERNAL ? internalSecret : appSecret;
    if (secret != null && !secret.isEmpty()) req.header("token", token(secret));
    return req;
  }

  private Reply send(HttpRequest.Builder req) throws IOException, InterruptedException {
    return new Reply(http.send(req.build(), HttpResponse.BodyHandlers.ofString()));
  }

  /** docs/auth.md, "Token": unixSeconds "." hex HMAC-SHA256 of app, space, user and the time. */
  private String token(String secret) {
    long now = System.currentTimeMillis() / 1000;
    String text = app + "\n" + space + "\n" + user + "\n" + now;
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      return now + "." + HexFormat.of().formatHex(mac.doFinal(text.getBytes(StandardCharsets.UTF_8)));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available", e);
    }
  }
}
