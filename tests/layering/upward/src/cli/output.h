#pragma once
// The CLI header the core file above must not include.
