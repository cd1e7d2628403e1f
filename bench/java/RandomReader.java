// Ours: a reader on BookKeeper's public client API (4.17.2), for bench/bench_rebalance.py. It is compiled
// there against the Java peer's jars (javac, at the bench's run); nothing of BookKeeper is kept here.
//
//   RandomReader zk=HOST:PORT ledgers=ID:ENTRIES,... size=BYTES mode=random until=FILE [reopen=200]
//       reads random entries of random ledgers until FILE exists, each handle opened again (no recovery)
//       every `reopen` reads so that moved ensembles are seen; prints "reads=N failures=F" and each
//       failure as "failed LEDGER ENTRY: why".
//   RandomReader zk=HOST:PORT ledgers=ID:ENTRIES,... size=BYTES mode=verify
//       reads every entry of every ledger through a fresh handle and compares it with what the bench
//       wrote; prints "verified LEDGERS ledgers ENTRIES entries BAD mismatched" and each mismatch.
//
// An entry's bytes, as bench_rebalance.payload writes them: "<ledger>:<entry>:" then byte
// 65 + (ledger*31 + entry*7 + i) % 58 for i = 0.. up to size.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;

import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class RandomReader {
    static final Map<String, String> ARGS = new LinkedHashMap<>();

    static byte[] payload(long ledger, long entry, int size) {
        byte[] head = (ledger + ":" + entry + ":").getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[size];
        System.arraycopy(head, 0, out, 0, head.length);
        for (int i = 0; i < size - head.length; i++) {
            out[head.length + i] = (byte) (65 + Math.floorMod(ledger * 31 + entry * 7 + i, 58));
        }
        return out;
    }

    public static void main(String[] argv) throws Exception {
        for (String a : argv) {
            int eq = a.indexOf('=');
            ARGS.put(a.substring(0, eq), a.substring(eq + 1));
        }
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri("zk+hierarchical://" + ARGS.get("zk") + ARGS.getOrDefault("root", "/ledgers"));
        Map<Long, Long> ledgers = new LinkedHashMap<>();
        for (String item : ARGS.get("ledgers").split(",")) {
            String[] kv = item.split(":");
            ledgers.put(Long.parseLong(kv[0]), Long.parseLong(kv[1]));
        }
        int size = Integer.parseInt(ARGS.get("size"));
        byte[] pw = new byte[0];
        BookKeeper bk = new BookKeeper(conf);
        try {
            if ("verify".equals(ARGS.get("mode"))) {
                long entries = 0, bad = 0;
                for (Map.Entry<Long, Long> l : ledgers.entrySet()) {
                    LedgerHandle lh = bk.openLedgerNoRecovery(l.getKey(), BookKeeper.DigestType.CRC32C, pw);
                    for (long first = 0; first < l.getValue(); first += 100) {
                        long last = Math.min(l.getValue() - 1, first + 99);
                        Enumeration<LedgerEntry> en = lh.readEntries(first, last);
                        while (en.hasMoreElements()) {
                            LedgerEntry e = en.nextElement();
                            entries++;
                            if (!Arrays.equals(e.getEntry(), payload(l.getKey(), e.getEntryId(), size))) {
                                bad++;
                                System.out.println("mismatch " + l.getKey() + " " + e.getEntryId());
                            }
                        }
                    }
                    lh.close();
                }
                System.out.println("verified " + ledgers.size() + " ledgers " + entries + " entries " + bad + " mismatched");
                return;
            }
            Random rnd = new Random(11);
            Long[] ids = ledgers.keySet().toArray(new Long[0]);
            Map<Long, LedgerHandle> open = new HashMap<>();
            int reopen = Integer.parseInt(ARGS.getOrDefault("reopen", "200"));
            long reads = 0, failures = 0;
            while (!Files.exists(Paths.get(ARGS.get("until")))) {
                long id = ids[rnd.nextInt(ids.length)];
                long entry = (long) (rnd.nextDouble() * ledgers.get(id));
                try {
                    LedgerHandle lh = open.get(id);
                    if (lh == null || reads % reopen == 0) {
                        if (lh != null) {
                            lh.close();
                        }
                        lh = bk.openLedgerNoRecovery(id, BookKeeper.DigestType.CRC32C, pw);
                        open.put(id, lh);
                    }
                    LedgerEntry e = lh.readEntries(entry, entry).nextElement();
                    if (!Arrays.equals(e.getEntry(), payload(id, entry, size))) {
                        throw new IllegalStateException("the bytes differ");
                    }
                } catch (Exception ex) {
                    failures++;
                    System.out.println("failed " + id + " " + entry + ": " + ex);
                    open.remove(id);
                }
                reads++;
            }
            System.out.println("reads=" + reads + " failures=" + failures);
        } finally {
            bk.close();
        }
    }
}
