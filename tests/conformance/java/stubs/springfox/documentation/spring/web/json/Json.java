// Compile-only stand-in: fastjson's optional Swagger serializer names this type; the built
// jar does not contain it.
package springfox.documentation.spring.web.json;

public final class Json {
    public String value() {
        throw new UnsupportedOperationException("compile-only stub");
    }
}
