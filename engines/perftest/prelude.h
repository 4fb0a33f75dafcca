/*
 * k8sdds: what RTI Perftest's C++ sources take from a middleware's generated code, given
 * for Eclipse Cyclone DDS. Included before every Perftest source file (g++ -include), so
 * that Perftest's own files compile unchanged:
 *  - the IDL's constants (MAX_BOUNDED_SEQ_SIZE, ...), as Cyclone's idlc generates them
 *    from Perftest's srcIdl/perftest.idl;
 *  - the middleware's version string, which Perftest prints with -version;
 *  - the factory that perftest_cpp.cxx calls where it picks its middleware.
 * SPDX-License-Identifier: EPL-1.0 (it builds with Perftest, under the same licence)
 */
#ifndef K8SDDS_PERFTEST_PRELUDE_H
#define K8SDDS_PERFTEST_PRELUDE_H

#ifdef __cplusplus
#include <string>

#include "perftest.h" /* idlc -l c srcIdl/perftest.idl */

std::string GetMiddlewareVersionString();

class IMessaging;
class ParameterManager;

/* The Cyclone DDS implementation of Perftest's IMessaging, for the sample type Perftest
 * chose (keyed or not, bounded or not). */
IMessaging *CycloneDDSImpl_new(ParameterManager &pm);
#endif

#endif
