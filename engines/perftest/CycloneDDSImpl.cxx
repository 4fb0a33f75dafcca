/*
 * k8sdds: RTI Perftest's middleware interface (srcCpp/MessagingIF.h) on Eclipse Cyclone DDS's
 * C API, so that Perftest's own program (its main loop, parameters, statistics and printer)
 * measures Cyclone DDS. Perftest's options become Cyclone's configuration here:
 *   -nic NAME           General/Interfaces/NetworkInterface name=NAME
 *   -peer ADDR          Discovery/Peers (unicast discovery; multicast off unless -multicast)
 *   -multicast          General/AllowMulticast true (else "spdp": discovery only)
 *   -transport UDPv4    General/Transport udp (the default)
 *   -transport TCP      General/Transport tcp, TCP/Port = -transportServerBindPort [7400]
 *   -transport TLS      as TCP, with SSL/Enable true (Cyclone's TLS over its TCP transport),
 *                       SSL/KeystoreFile: -transportCertFile, -transportPrivateKey and
 *                       -transportCertAuthority in one private file, as Cyclone wants them
 *                       (Perftest's own defaults for them: ./resource/secure/...); the peer's
 *                       certificate is verified, both ways, TLS 1.3 at least
 *   -secure...          Security: Cyclone's DDS Security plugins, loaded from beside the
 *                       libddsc this program runs with (Debian: its libddsc0debian folder):
 *                       -secureGovernanceFile      AccessControl/Governance (required, as
 *                                                  with RTI Connext)
 *                       -securePermissionsFile     AccessControl/Permissions
 *                       -secureCertAuthority       Authentication/IdentityCA and
 *                                                  AccessControl/PermissionsCA
 *                       -secureCertFile            Authentication/IdentityCertificate
 *                       -securePrivateKey          Authentication/PrivateKey
 *                       (Perftest's own defaults for the last four: ./resource/secure/...)
 *   -batchSize BYTES    Internal/WriteBatch, flushed when BYTES are queued (and at flush());
 *                       without it, one sample per datagram (General/MaxMessageSize and
 *                       FragmentSize from -dataLen), as RTI Connext sends samples unbatched
 *   -bestEffort         best-effort reliability on the Throughput and Latency topics
 *   -sendQueueSize N    Perftest's initial burst (Cyclone bounds the queue by its watermarks)
 *   -domain D           the DDS domain
 * Anything else Cyclone cannot honour is refused at start with the option's name
 * (see refused() below); k8sdds refuses the same when it checks a schedule.
 * $CYCLONEDDS_URI, when set, is read before the options above (its settings first).
 * SPDX-License-Identifier: EPL-1.0 (it builds with Perftest, under the same licence)
 */
#include <dds/dds.h>
#include <dds/version.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "MessagingIF.h"
#include "PerftestSecurity.h"
#include "PerftestTransport.h"
#include "perftest_cpp.h"

std::string GetMiddlewareVersionString()
{
    return std::string("Eclipse Cyclone DDS ") + DDS_VERSION;
}

namespace {

const uint32_t MAX_TAKE = 256;  // samples taken at once
// one sample per datagram (see configuration()): a datagram holds a sample and its protocol
// messages; the largest stays under UDP's 65,507 B
const unsigned long long SAMPLE_OVERHEAD = 64;
const unsigned long long LARGEST_DATAGRAM = 65000;

/* Perftest's sample, as idlc lays out all four of its types in C (the same members). */
typedef TestData_t Sample;

std::string xml_escaped(const std::string &text)
{
    std::string out;
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default: out += c;
        }
    }
    return out;
}

/* Perftest's options Cyclone DDS cannot honour here: the first one given, with why. */
std::string refused(ParameterManager &pm)
{
    struct Rule { const char *option; const char *why; };
    static const Rule rules[] = {
        {"dynamicData", "Cyclone DDS has no Dynamic Data API"},
        {"flatdata", "FlatData is RTI Connext's"},
        {"zerocopy", "Zero Copy is RTI Connext's"},
        {"asynchronous", "Cyclone DDS writes synchronously"},
        {"cft", "content-filtered topics are not in Cyclone DDS"},
        {"qosFile", "Perftest's QoS XML is RTI Connext's"},
        {"rawTransport", "the raw transport is RTI Connext's"},
        {"secureEncryptionAlgo", "Cyclone's crypto plugin has no choice of algorithm "
                                 "(the governance document decides what is protected)"},
        {"secureEnableAAD", "Cyclone's crypto plugin has no additional authenticated data"},
        {"secureLibrary", "it names RTI's security library; Cyclone's plugins are loaded "
                          "from beside libddsc"},
        {"lightWeightSecurity", "lightweight security is RTI Connext's"},
        {"securePSK", "pre-shared keys are RTI Connext's"},
        {"securePSKAlgorithm", "pre-shared keys are RTI Connext's"},
        {"secureRtpsHmacOnly", "HMAC-only security is RTI Connext's"},
        {"secureDebug", "Cyclone's security plugins log through its Tracing, not a level"},
    };
    for (const Rule &rule : rules) {
        if (pm.is_set(rule.option)) {
            return std::string("-") + rule.option + ": " + rule.why;
        }
    }
    const std::string transport = pm.get<std::string>("transport");
    if (pm.is_set("transport") && transport != "UDPv4" && transport != "TCP"
            && transport != "TLS") {
        return "-transport " + transport
                + ": Cyclone DDS carries UDPv4, TCP and TLS in this build";
    }
    if (pm.get<bool>("multicast") && transport != "UDPv4") {
        return "-multicast: needs -transport UDPv4";
    }
    if (pm.group_is_used(SECURE) && pm.get<std::string>("secureGovernanceFile").empty()) {
        return "-secureGovernanceFile: DDS Security needs a governance document (as with "
               "RTI Connext)";
    }
    return "";
}

/* -batchSize as RTI Connext's implementation in Perftest treats it (RTIDDSImpl's
 * validate_input): off in a latency test, for large data, when the batch cannot hold two
 * samples and with -pubRate; an error where the user asked for it in a latency test or with
 * large data. The negative values are Perftest's own, which it prints as reasons. */
bool batching(ParameterManager &pm)
{
    if (pm.get<long>("batchSize") <= 0) {
        return true;
    }
    const bool asked = pm.is_set("batchSize");
    const unsigned long long length = pm.get<unsigned long long>("dataLen");
    if (pm.get<bool>("latencyTest")) {
        if (asked) {
            fprintf(stderr, "Batching cannot be used in a Latency test.\n");
            return false;
        }
        pm.set<long>("batchSize", 0);
        return true;
    }
    if (length > (unsigned long long) MAX_BOUNDED_SEQ_SIZE) {
        if (asked) {
            fprintf(stderr, "Batching cannot be used with Large Data.\n");
            return false;
        }
        pm.set<long>("batchSize", -2);
        return true;
    }
    if ((unsigned long long) pm.get<long>("batchSize") < length * 2) {
        pm.set<long>("batchSize", asked ? -1 : 0);
    } else if ((pm.is_set("pubRate") || pm.is_set("pubRateBps")) && asked) {
        pm.set<long>("batchSize", -4);
    }
    return true;
}

/* The directory of Cyclone's DDS Security plugins: Debian's private folder beside the libddsc
 * this program runs with, or that library's own folder; empty when neither has them (Cyclone
 * then looks them up by name on the library path). */
std::string plugin_directory()
{
    Dl_info info;
    if (dladdr((void *) &dds_create_participant, &info) == 0 || info.dli_fname == NULL) {
        return "";
    }
    const std::string library(info.dli_fname);
    const std::string folder = library.substr(0, library.rfind('/'));
    for (const std::string &candidate : {folder + "/libddsc0debian", folder}) {
        if (access((candidate + "/libdds_security_auth.so").c_str(), R_OK) == 0) {
            return candidate;
        }
    }
    return "";
}

/* DDS Security's `file:` form of a path (left as it is when it has one). */
std::string file_uri(const std::string &path)
{
    return xml_escaped(path.compare(0, 5, "file:") == 0 ? path : "file:" + path);
}

/* Cyclone's Security element for Perftest's -secure options. */
std::string security(ParameterManager &pm)
{
    const std::string folder = plugin_directory();
    auto library = [&folder](const char *name, const char *kind) {
        const std::string path = folder.empty() ? std::string("dds_security_") + name
                : folder + "/libdds_security_" + name + ".so";
        return "<Library path=\"" + xml_escaped(path) + "\" initFunction=\"init_" + kind
                + "\" finalizeFunction=\"finalize_" + kind + "\"/>";
    };
    const std::string ca = file_uri(pm.get<std::string>("secureCertAuthority"));
    std::ostringstream xml;
    xml << "<Security><Authentication>" << library("auth", "authentication")
        << "<IdentityCertificate>" << file_uri(pm.get<std::string>("secureCertFile"))
        << "</IdentityCertificate><IdentityCA>" << ca << "</IdentityCA><PrivateKey>"
        << file_uri(pm.get<std::string>("securePrivateKey")) << "</PrivateKey>"
        << "</Authentication><Cryptographic>" << library("crypto", "crypto")
        << "</Cryptographic><AccessControl>" << library("ac", "access_control")
        << "<PermissionsCA>" << ca << "</PermissionsCA><Governance>"
        << file_uri(pm.get<std::string>("secureGovernanceFile")) << "</Governance>"
        << "<Permissions>" << file_uri(pm.get<std::string>("securePermissionsFile"))
        << "</Permissions></AccessControl></Security>";
    return xml.str();
}

/* Cyclone's configuration for Perftest's options (XML, after $CYCLONEDDS_URI); `keystore`:
 * the TLS keystore file, with -transport TLS. */
std::string configuration(ParameterManager &pm, const std::string &keystore)
{
    std::ostringstream xml;
    const std::string transport = pm.get<std::string>("transport");
    const bool tls = transport == "TLS";
    const bool tcp = transport == "TCP" || tls;
    const std::vector<std::string> peers = pm.get_vector<std::string>("peer");
    const bool multicast = pm.get<bool>("multicast");
    xml << "<CycloneDDS><Domain id=\"any\"><General>";
    if (!pm.get<std::string>("nic").empty()) {
        xml << "<Interfaces><NetworkInterface name=\""
            << xml_escaped(pm.get<std::string>("nic")) << "\"/></Interfaces>";
    }
    xml << "<AllowMulticast>"
        << (multicast ? "true" : (peers.empty() ? "spdp" : "false"))
        << "</AllowMulticast>";
    xml << "<Transport>" << (tcp ? "tcp" : "udp") << "</Transport>";
    // Not batching (every process but a batching publisher): one sample per datagram, whole
    // up to 65,000 B, as RTI Connext sends it without batching (its UDPv4 message_size_max
    // is 65,507 B) and as k8sdds runs ddsperf (k8sdds/perftest/ddsperf.py, unpacked()). Left
    // alone, Cyclone packs queued samples into datagrams of up to 14,720 B and cuts a sample
    // over 1,344 B into DDS fragments.
    const bool batched = pm.get<bool>("pub") && pm.get<long>("batchSize") > 0;
    if (!batched) {
        const unsigned long long length = pm.get<unsigned long long>("dataLen");
        const unsigned long long largest = std::min(2 * length + SAMPLE_OVERHEAD,
                                                    LARGEST_DATAGRAM);
        xml << "<MaxMessageSize>" << largest << "B</MaxMessageSize><FragmentSize>"
            << std::min(length + SAMPLE_OVERHEAD, largest - SAMPLE_OVERHEAD)
            << "B</FragmentSize>";
    }
    xml << "</General>";
    if (tcp) {
        std::string port = pm.get<std::string>("transportServerBindPort");
        xml << "<TCP><Port>" << xml_escaped(port.empty() ? "7400" : port) << "</Port></TCP>";
    }
    if (tls) {
        xml << "<SSL><Enable>true</Enable><CertificateVerification>true"
            << "</CertificateVerification><VerifyClient>true</VerifyClient>"
            << "<SelfSignedCertificates>false</SelfSignedCertificates><KeystoreFile>"
            << xml_escaped(keystore) << "</KeystoreFile><KeyPassphrase></KeyPassphrase>"
            << "<MinimumTLSVersion>1.3</MinimumTLSVersion></SSL>";
    }
    xml << "<Discovery><ParticipantIndex>auto</ParticipantIndex>"
        << "<MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>";
    if (!peers.empty()) {
        // a peer's first announcement can be lost while it starts: repeat it every second
        xml << "<SPDPInterval>1s</SPDPInterval><Peers>";
        for (const std::string &peer : peers) {
            xml << "<Peer address=\"" << xml_escaped(peer) << "\"/>";
        }
        xml << "</Peers>";
    }
    xml << "</Discovery>";
    // the publisher's throughput writes only, as RTI batches only its Throughput writer:
    // Cyclone's batching is the whole domain's, and a subscriber's pongs go out at once
    if (batched) {
        xml << "<Internal><WriteBatch>true</WriteBatch></Internal>";
    }
    if (pm.group_is_used(SECURE)) {
        xml << security(pm);
    }
    xml << "</Domain></CycloneDDS>";
    const char *uri = getenv("CYCLONEDDS_URI");
    return (uri != NULL && *uri != '\0') ? std::string(uri) + "," + xml.str() : xml.str();
}

/* Cyclone's TLS keystore: Perftest's certificate, private key and certificate authority
 * files, in that order, in one file only this user can read (removed once Cyclone has read
 * it, when the participant is made); its path,
 * or empty after saying on stderr which file could not be read. */
std::string keystore(ParameterManager &pm)
{
    char path[] = "/tmp/perftest-keystore-XXXXXX";
    const int fd = mkstemp(path);  // mode 0600
    if (fd < 0) {
        perror("[Error] the TLS keystore");
        return "";
    }
    close(fd);
    std::ofstream out(path, std::ios::binary);
    for (const char *option : {"transportCertFile", "transportPrivateKey",
                               "transportCertAuthority"}) {
        const std::string file = pm.get<std::string>(option);
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            fprintf(stderr, "[Error] -%s %s: cannot read it\n", option, file.c_str());
            unlink(path);
            return "";
        }
        out << in.rdbuf() << "\n";
    }
    return path;
}

/* Until `entity` (a writer or a reader) has matched `count` peers: woken by Cyclone when its
 * matched status changes (`status`), not polled; `matched` reads the current count. */
template <typename Matched>
void wait_matched(dds_entity_t entity, uint32_t status, int count, Matched matched)
{
    dds_entity_t waitset = dds_create_waitset(dds_get_participant(entity));
    dds_set_status_mask(entity, status);
    dds_waitset_attach(waitset, entity, 0);
    uint32_t now = 0;
    while (matched(now) == DDS_RETCODE_OK && now < (uint32_t) count) {
        dds_waitset_wait(waitset, NULL, 0, DDS_SECS(1));  // a second at most: then look again
    }
    dds_delete(waitset);
}

void fill(TestMessage &message, const Sample &sample)
{
    message.entity_id = sample.entity_id;
    message.seq_num = sample.seq_num;
    message.timestamp_sec = sample.timestamp_sec;
    message.timestamp_usec = sample.timestamp_usec;
    message.latency_ping = sample.latency_ping;
    message.size = (int) sample.bin_data._length;
    message.data = (char *) sample.bin_data._buffer;
}

class Writer : public IMessagingWriter {
  public:
    Writer(dds_entity_t writer, ParameterManager &pm, PerftestSemaphore *pong, bool reliable)
            : _writer(writer), _pong(pong), _reliable(reliable), _counter(0), _queued(0)
    {
        memset(&_sample, 0, sizeof(_sample));
        _instances = pm.get<long>("instances");
        _target = pm.get<long>("writeInstance");
        _batch = pm.get<long>("batchSize");
    }

    void wait_for_readers(int count)
    {
        wait_matched(_writer, DDS_PUBLICATION_MATCHED_STATUS, count, [this](uint32_t &now) {
            dds_publication_matched_status_t status;
            dds_return_t rc = dds_get_publication_matched_status(_writer, &status);
            now = status.current_count;
            return rc;
        });
    }

    bool send(const TestMessage &message, bool isCftWildCardKey)
    {
        long key = 0;
        if (isCftWildCardKey) {
            key = MAX_CFT_VALUE;
        } else if (_instances > 1) {
            key = _target == -1 ? (long) (_counter++ % _instances) : _target;
        }
        for (int c = 0; c < KEY_SIZE; c++) {
            _sample.key[c] = (unsigned char) (key >> c * 8);
        }
        _sample.entity_id = message.entity_id;
        _sample.seq_num = message.seq_num;
        _sample.timestamp_sec = message.timestamp_sec;
        _sample.timestamp_usec = message.timestamp_usec;
        _sample.latency_ping = message.latency_ping;
        _sample.bin_data._buffer = (uint8_t *) message.data;
        _sample.bin_data._length = (uint32_t) message.size;
        _sample.bin_data._maximum = (uint32_t) message.size;
        _sample.bin_data._release = false;
        dds_return_t rc = dds_write(_writer, &_sample);
        if (rc != DDS_RETCODE_OK) {
            fprintf(stderr, "[Error] dds_write: %s\n", dds_strretcode(rc));
            return false;
        }
        if (_batch > 0) {
            _queued += message.size;
            if (_queued >= _batch) {
                flush();
            }
        }
        return true;
    }

    void flush()
    {
        dds_write_flush(_writer);
        _queued = 0;
    }

    bool wait_for_ping_response()
    {
        return _pong == NULL
                || PerftestSemaphore_take(_pong, PERFTEST_SEMAPHORE_TIMEOUT_INFINITE);
    }

    bool wait_for_ping_response(int timeout)
    {
        return _pong == NULL || PerftestSemaphore_take(_pong, timeout);
    }

    bool notify_ping_response()
    {
        return _pong == NULL || PerftestSemaphore_give(_pong);
    }

    /* Perftest sends its end-of-test sample again and again, waiting for acknowledgements
     * between tries. A best-effort writer gets none and would send them all at once, behind
     * the subscriber's backlog (seen: with -bestEffort, 256 B, no subscriber ever printed its
     * summary); so it waits the whole time instead, and the tries are spread as with RTI. */
    void wait_for_ack(int sec, unsigned int nsec)
    {
        const dds_duration_t timeout = DDS_SECS(sec) + (dds_duration_t) nsec;
        if (_reliable) {
            dds_wait_for_acks(_writer, timeout);
        } else {
            dds_sleepfor(timeout);
        }
    }

  private:
    dds_entity_t _writer;
    PerftestSemaphore *_pong;
    bool _reliable;
    Sample _sample;
    unsigned long _counter;
    long _instances, _target, _batch, _queued;
};

/* A reader. With a callback (Perftest's listener mode, its default, as RTI's implementations
 * take it), Cyclone's receive thread hands each sample to it in a data-available listener: no
 * thread of k8sdds' own between the wire and Perftest, as in ddsperf and RTI's Perftest. A
 * subscriber answers a ping from there, so its echo's writer must never wait for
 * acknowledgements that this same thread delivers: qos_for() keeps one sample in the Latency
 * writer's history (keeping all, the echo blocked this thread: "dds_write: Timeout" after
 * 10 s, at 256 B and at 60,000 B; keeping one, latency tests of 256 B to 1 MB ran). Without a
 * callback (Perftest's -useReadThread), Perftest's own thread takes the samples with
 * receive_message(), woken by a waitset. */
class Reader : public IMessagingReader {
  public:
    Reader(dds_entity_t participant, IMessagingCB *callback)
            : _reader(0), _callback(callback), _taken(0), _next(0)
    {
        _samples[0] = NULL;
        _waitset = dds_create_waitset(participant);
        _wake = dds_create_guardcondition(participant);
        dds_waitset_attach(_waitset, _wake, 1);
    }

    ~Reader()
    {
        shutdown();
    }

    /* The listener's arguments: this reader, its one callback (data available). */
    dds_listener_t *listener()
    {
        if (_callback == NULL) {
            return NULL;
        }
        dds_listener_t *made = dds_create_listener(this);
        dds_lset_data_available(made, on_data_available);
        return made;
    }

    /* The reader entity, once made (with listener() when there is a callback). */
    void attach(dds_entity_t reader)
    {
        _reader = reader;
        _data = dds_create_readcondition(reader, DDS_ANY_STATE);
        dds_waitset_attach(_waitset, _data, 0);
    }

    void wait_for_writers(int count)
    {
        wait_matched(_reader, DDS_SUBSCRIPTION_MATCHED_STATUS, count, [this](uint32_t &now) {
            dds_subscription_matched_status_t status;
            dds_return_t rc = dds_get_subscription_matched_status(_reader, &status);
            now = status.current_count;
            return rc;
        });
    }

    TestMessage *receive_message()
    {
        while (true) {
            while (_next < _taken) {
                int i = _next++;
                if (_infos[i].valid_data) {
                    fill(_message, *(const Sample *) _samples[i]);
                    return &_message;
                }
            }
            release();
            int n = dds_take(_reader, _samples, _infos, MAX_TAKE, MAX_TAKE);
            if (n > 0) {
                _taken = n;
                continue;
            }
            dds_attach_t fired[2];
            if (dds_waitset_wait(_waitset, fired, 2, DDS_INFINITY) < 0) {
                return NULL;  // the reader is gone
            }
            bool woken = false;
            if (dds_read_guardcondition(_wake, &woken) != DDS_RETCODE_OK || woken) {
                return NULL;  // unblock() or shutdown(): the test is ending
            }
        }
    }

    bool unblock()
    {
        return dds_set_guardcondition(_wake, true) == DDS_RETCODE_OK;
    }

    /* No callback after this returns (Cyclone waits for one under way when the listener is
     * taken away), Perftest's reading thread unblocked, the loan given back. */
    void shutdown()
    {
        if (_callback != NULL && _reader > 0) {
            dds_set_listener(_reader, NULL);
            _callback = NULL;
        }
        unblock();
        release();
    }

  private:
    /* On Cyclone's receive thread: every sample there is, each to Perftest's callback. */
    static void on_data_available(dds_entity_t reader, void *arg)
    {
        Reader *self = (Reader *) arg;
        void *samples[MAX_TAKE] = {NULL};
        dds_sample_info_t infos[MAX_TAKE];
        TestMessage message;
        int n;
        while ((n = dds_take(reader, samples, infos, MAX_TAKE, MAX_TAKE)) > 0) {
            for (int i = 0; i < n; i++) {
                if (infos[i].valid_data && self->_callback != NULL) {
                    fill(message, *(const Sample *) samples[i]);
                    self->_callback->process_message(message);
                }
            }
            dds_return_loan(reader, samples, n);
        }
    }

    void release()
    {
        if (_taken > 0) {
            dds_return_loan(_reader, _samples, _taken);
        }
        _samples[0] = NULL;
        _taken = _next = 0;
    }

    dds_entity_t _reader, _waitset, _wake, _data = 0;
    IMessagingCB *_callback;
    void *_samples[MAX_TAKE];
    dds_sample_info_t _infos[MAX_TAKE];
    int _taken, _next;
    TestMessage _message;
};

class CycloneDDSImpl : public IMessaging {
  public:
    explicit CycloneDDSImpl(const dds_topic_descriptor_t *descriptor)
            : _descriptor(descriptor), _pm(NULL), _domain(0), _participant(0), _pong(NULL)
    {
    }

    ~CycloneDDSImpl()
    {
        shutdown();
    }

    bool initialize(ParameterManager &pm, perftest_cpp *parent)
    {
        _pm = &pm;
        (void) parent;
        // whole lines on stdout: Perftest's timer thread writes "Finishing test due to
        // timer..." on stderr while the main thread prints its summary on stdout, and with
        // both in one file a block-buffered stdout was cut mid-line by it (seen: one latency
        // test in 16, its summary unreadable)
        setvbuf(stdout, NULL, _IOLBF, 0);
        std::string why = refused(pm);
        if (!why.empty()) {
            fprintf(stderr, "[Error] not on Cyclone DDS: %s\n", why.c_str());
            return false;
        }
        if (!batching(pm)) {
            return false;
        }
        // Perftest's own checks and defaults: the TLS files (./resource/secure/...)
        _transport.initialize(&pm);
        if (!_transport.validate_input()) {
            return false;
        }
        _secure = pm.group_is_used(SECURE);
        if (_secure) {
            _security.initialize(&pm);
            if (!_security.validateSecureArgs()) {
                return false;
            }
        }
        if (pm.get<std::string>("transport") == "TLS") {
            _keystore = keystore(pm);
            if (_keystore.empty()) {
                return false;
            }
        }
        const dds_domainid_t id = (dds_domainid_t) pm.get<int>("domain");
        _config = configuration(pm, _keystore);
        _domain = dds_create_domain(id, _config.c_str());
        if (_domain < 0) {
            fprintf(stderr, "[Error] Cyclone DDS refused its configuration (%s): %s\n",
                    dds_strretcode(_domain), _config.c_str());
            return false;
        }
        _participant = dds_create_participant(id, NULL, NULL);
        if (!_keystore.empty()) {
            // Cyclone has read it (its TLS context is made with the domain's transport):
            // gone now, so that a Perftest killed before its shutdown leaves no key behind
            unlink(_keystore.c_str());
            _keystore.clear();
        }
        if (_participant < 0) {
            fprintf(stderr, "[Error] dds_create_participant: %s\n",
                    dds_strretcode(_participant));
            return false;
        }
        if (pm.get<bool>("latencyTest")) {
            // empty, as RTI's own implementations make it (a binary semaphore): the
            // publisher's first wait blocks until the first pong, so one ping is in flight
            // (Perftest's C++11 default count is one: two pings were)
            _pong = PerftestSemaphore_new(0);
        }
        return true;
    }

    std::string print_configuration()
    {
        std::ostringstream out;
        out << "\tMiddleware: " << GetMiddlewareVersionString() << "\n"
            << "\tCyclone DDS configuration: " << _config << "\n"
            << _transport.printTransportConfigurationSummary();
        if (_secure) {
            out << _security.printSecurityConfigurationSummary();
        }
        return out.str();
    }

    void shutdown()
    {
        if (_domain > 0) {
            dds_delete(_domain);  // and every entity in it
            _domain = _participant = 0;
        }
        if (_pong != NULL) {
            PerftestSemaphore_delete(_pong);
            _pong = NULL;
        }
        if (!_keystore.empty()) {
            unlink(_keystore.c_str());
            _keystore.clear();
        }
    }

    unsigned long get_initial_burst_size()
    {
        return (unsigned long) _pm->get<int>("sendQueueSize");
    }

    IMessagingWriter *create_writer(const char *topic_name)
    {
        dds_entity_t writer = endpoint(topic_name, dds_create_writer, "dds_create_writer");
        if (writer < 0) {
            return NULL;
        }
        const bool reliable = strcmp(topic_name, ANNOUNCEMENT_TOPIC_NAME) == 0
                || !_pm->get<bool>("bestEffort");
        return new Writer(writer, *_pm, _pong, reliable);
    }

    IMessagingReader *create_reader(const char *topic_name, IMessagingCB *callback)
    {
        Reader *made = new Reader(_participant, callback);
        dds_listener_t *listener = made->listener();
        dds_entity_t reader = endpoint(topic_name, dds_create_reader, "dds_create_reader",
                                       listener);
        if (listener != NULL) {
            dds_delete_listener(listener);
        }
        if (reader < 0) {
            delete made;
            return NULL;
        }
        made->attach(reader);
        return made;
    }

    /* Yes: Cyclone's data-available listeners (see Reader). */
    bool supports_listeners()
    {
        return true;
    }

  private:
    dds_entity_t make_topic(const char *name)
    {
        dds_entity_t topic = dds_create_topic(_participant, _descriptor, name, NULL, NULL);
        if (topic < 0) {
            fprintf(stderr, "[Error] dds_create_topic %s: %s\n", name, dds_strretcode(topic));
        }
        return topic;
    }

    /* A writer or a reader (`create`) on its topic, with the topic's QoS; negative on error,
     * said on stderr. */
    dds_entity_t endpoint(const char *topic_name,
                          dds_entity_t (*create)(dds_entity_t, dds_entity_t, const dds_qos_t *,
                                                 const dds_listener_t *),
                          const char *what, const dds_listener_t *listener = NULL)
    {
        dds_entity_t topic = make_topic(topic_name);
        if (topic < 0) {
            return topic;
        }
        dds_qos_t *qos = qos_for(topic_name, create == dds_create_writer);
        dds_entity_t made = create(_participant, topic, qos, listener);
        dds_delete_qos(qos);
        if (made < 0) {
            fprintf(stderr, "[Error] %s %s: %s\n", what, topic_name, dds_strretcode(made));
        }
        return made;
    }

    /* As Perftest's own QoS profiles: the announcements reliable and kept for late
     * joiners; throughput and latency reliable unless -bestEffort; every history kept but
     * the Latency writer's, which keeps its last sample (as ddsperf's pong writer): it
     * answers pings from Cyclone's receive thread (see Reader), and a reliable writer
     * keeping all waits there for acknowledgements once its unacknowledged samples pass the
     * watermark (Perftest's 50 start-up samples do). */
    dds_qos_t *qos_for(const char *topic_name, bool writer)
    {
        dds_qos_t *qos = dds_create_qos();
        const bool announcement = strcmp(topic_name, ANNOUNCEMENT_TOPIC_NAME) == 0;
        if (!announcement && _pm->get<bool>("bestEffort")) {
            dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0);
        } else {
            dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
        }
        if (writer && strcmp(topic_name, LATENCY_TOPIC_NAME) == 0) {
            dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, 1);
        } else {
            dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, 0);
        }
        if (announcement) {
            dds_qset_durability(qos, DDS_DURABILITY_TRANSIENT_LOCAL);
        }
        return qos;
    }

    const dds_topic_descriptor_t *_descriptor;
    ParameterManager *_pm;
    dds_entity_t _domain, _participant;
    PerftestSemaphore *_pong;
    std::string _config, _keystore;
    PerftestTransport _transport;
    PerftestSecurity _security;
    bool _secure = false;
};

}  // namespace

IMessaging *CycloneDDSImpl_new(ParameterManager &pm)
{
    const bool keyed = pm.get<bool>("keyed");
    const bool unbounded = pm.get<int>("unbounded") != 0;
    const dds_topic_descriptor_t *descriptor =
            keyed ? (unbounded ? &TestDataKeyedLarge_t_desc : &TestDataKeyed_t_desc)
                  : (unbounded ? &TestDataLarge_t_desc : &TestData_t_desc);
    return new CycloneDDSImpl(descriptor);
}
