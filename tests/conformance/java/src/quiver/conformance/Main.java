package quiver.conformance;

/**
 * The official RocketMQ Java client (4.9.8) driven as an application would drive it, one
 * scenario per run: {@code java quiver.conformance.Main <scenario> key=value...}.  What it
 * sees goes to stdout as JSON lines (see {@link Report}); the client's own log goes under
 * {@code user.home}.  Any system property the client reads (tls.enable and the tls.client.*
 * settings) is given on the java command line, as an application's operator would.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: Main send|push|pull|litepull|transaction key=value...");
            System.exit(2);
        }
        Options options = new Options(args, 1);
        switch (args[0]) {
            case "send":
                Send.run(options);
                break;
            case "push":
                Push.run(options);
                break;
            case "pull":
                Pull.run(options);
                break;
            case "litepull":
                LitePull.run(options);
                break;
            case "transaction":
                Transaction.run(options);
                break;
            default:
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
        }
        // The client's non-daemon threads (timers, Netty) must not keep a finished run alive.
        System.exit(0);
    }
}
