// Compile-only stand-in: fastjson's optional Moneta codec names this type. The built jar
// does not contain it; at run time the codec is only reached when JSR 354 is on the classpath.
package javax.money;

public interface CurrencyUnit {
    String getCurrencyCode();
}
