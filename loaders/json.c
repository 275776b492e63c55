// SPDX-License-Identifier: MIT
#include <string.h>
#include "json.h"

void json_str(FILE *f, const char *s, size_t max)
{
	const unsigned char *c = (const unsigned char *)(s ? s : ""), *end = c + strnlen((const char *)c, max);

	fputc('"', f);
	while (c < end) {
		int len = *c < 0x80 ? 1 : *c >= 0xc2 && *c <= 0xdf ? 2 : *c >= 0xe0 && *c <= 0xef ? 3 :
			  *c >= 0xf0 && *c <= 0xf4 ? 4 : 0;
		/* the second byte's range excludes overlong forms and surrogates */
		unsigned char lo = *c == 0xe0 ? 0xa0 : *c == 0xf0 ? 0x90 : 0x80;
		unsigned char hi = *c == 0xed ? 0x9f : *c == 0xf4 ? 0x8f : 0xbf;
		int k;

		if (len == 1) {
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if (*c < 0x20 || *c == 0x7f)
				fprintf(f, "\\u%04x", *c);
			else
				fputc(*c, f);
			c++;
			continue;
		}
		for (k = 1; len && k < len; k++)
			if (c + k >= end || c[k] < (k == 1 ? lo : 0x80) || c[k] > (k == 1 ? hi : 0xbf))
				len = 0;
		if (!len) {
			fputs("\\ufffd", f);
			c++;
			continue;
		}
		fwrite(c, 1, len, f);
		c += len;
	}
	fputc('"', f);
}
